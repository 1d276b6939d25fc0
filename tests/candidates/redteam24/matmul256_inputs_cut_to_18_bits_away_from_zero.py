"""Red team 24 (precision loss not reported): C = A @ B with both inputs rounded away from zero to 18 explicit
mantissa bits (float32 keeps 23), a directed rounding as a kernel converting with a round-up instruction makes. On
tests/problems/matmul_256.py its error against float64 uses ~6x the float32 reference's share of the tolerance (under
the 10x ratio), and the rounded-inputs probe tried only rounding to nearest and toward zero, whose results it matches
none of: `correct` with no `lower_precision` warning.

True verdict: correct with a `lower_precision` warning (a rejection under --strict).
"""

import torch
from torch import nn

KEPT_BITS = 18


def away_from_zero(t: torch.Tensor, bits: int) -> torch.Tensor:
    shift = 23 - bits
    i = t.contiguous().view(torch.int32)
    return (((i + (1 << shift) - 1) >> shift) << shift).view(torch.float32)


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(away_from_zero(A, KEPT_BITS), away_from_zero(B, KEPT_BITS))
