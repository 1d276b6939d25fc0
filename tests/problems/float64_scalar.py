"""A float64 problem returning a Python number: the variance by the textbook formula, E[x^2] - E[x]^2 with a mean
of 10 (101 - 100: float32 loses ~1e-5 of it, within float32's tolerance and far outside float64's). Judged at
float64's tolerance, as its tensor would be (tests/candidates/redteam9/float64_scalar_in_float32.py).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return ((x * x).mean() - x.mean() ** 2).item()


def get_inputs():
    return [torch.randn(1 << 14, dtype=torch.float64) + 10]


def get_init_inputs():
    return []
