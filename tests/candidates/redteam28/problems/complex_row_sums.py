"""Row sums of a complex64 matrix given as float32 (re, im) pairs: a complex output, compared part by part."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return torch.view_as_complex(a).sum(-1)


def get_inputs():
    return [torch.randn(256, 4096, 2)]


def get_init_inputs():
    return []
