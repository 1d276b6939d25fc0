"""A problem with a complex output: the product of two complex vectors given as float32 (re, im) pairs (complex64),
judged part by part at float32's tolerance (tests/candidates/redteam21/complex_output_narrowed.py)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.view_as_complex(a) * torch.view_as_complex(b)


def get_inputs():
    return [torch.randn(1 << 16, 2), torch.randn(1 << 16, 2)]


def get_init_inputs():
    return []
