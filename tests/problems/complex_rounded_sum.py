"""A complex output float32 rounds coarsely: row sums of (z + 1e4) - 1e4 for complex64 z (each value rounded by up
to ~5e-4 on its way), so an exact kernel is ~0.02 from the reference where the tolerance allows ~0.007: judged by
the float64 fallback, part by part (tests/candidates/redteam21/honest_complex_exact_sum.py)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a):
        z = torch.view_as_complex(a)
        return ((z + 1e4) - 1e4).sum(-1)


def get_inputs():
    return [torch.randn(64, 4096, 2)]


def get_init_inputs():
    return []
