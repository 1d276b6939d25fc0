"""Honest: the reference's own steps (scale `a` in place, then multiply), in float32 as it does
(problems/matmul256_scales_its_input.py).

True verdict: correct, with no `lower_precision` warning.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A.mul_(0.5)
        return torch.matmul(A, B)
