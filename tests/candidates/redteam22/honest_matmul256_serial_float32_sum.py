"""Honest: C = A @ B summed in float32 one rank-1 update at a time (a serial sum over K, the order a naive
kernel uses), with no rounding of the inputs. Its error against float64 can use several times the reference's
share of the tolerance, as input rounding can, but it matches no rounding of the inputs.

True verdict: correct, with no `lower_precision` warning.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype)
        for k in range(A.shape[1]):
            out += A[:, k : k + 1] * B[k : k + 1, :]
        return out
