"""Red team 24 (precision loss not reported): C = A @ B with both inputs rounded toward +infinity to 19 explicit
mantissa bits (float32 keeps 23): up in magnitude for positive values, toward zero for negative ones. On
tests/problems/matmul_256.py its error against float64 uses ~5x the float32 reference's share of the tolerance (under
the 10x ratio), and it matches neither rounding to nearest nor toward zero, all the rounded-inputs probe tried:
`correct` with no `lower_precision` warning.

True verdict: correct with a `lower_precision` warning (a rejection under --strict).
"""

import torch
from torch import nn

KEPT_BITS = 19


def toward_plus_infinity(t: torch.Tensor, bits: int) -> torch.Tensor:
    shift = 23 - bits
    i = t.contiguous().view(torch.int32)
    up = ((i + (1 << shift) - 1) >> shift) << shift  # larger magnitude
    down = (i >> shift) << shift  # smaller magnitude
    return torch.where(t >= 0, up, down).view(torch.float32)


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(toward_plus_infinity(A, KEPT_BITS), toward_plus_infinity(B, KEPT_BITS))
