"""Red team 22 (precision loss not reported): C = A @ B with both inputs rounded to 18 explicit mantissa bits
(float32 keeps 23), as a split-precision kernel would compute. On tests/problems/matmul_256.py its error against
float64 uses ~5x the float32 reference's own share of the tolerance: under the 10x ratio, so `correct` with no
`lower_precision` warning. (On level1/1_Square_matrix_multiplication_ a cut this deep already fails the tolerance.)

True verdict: correct with a `lower_precision` warning (a rejection under --strict).
"""

import torch
from torch import nn

KEPT_BITS = 18


def rounded(t: torch.Tensor, bits: int) -> torch.Tensor:
    shift = 23 - bits
    i = t.contiguous().view(torch.int32)
    return (((i + (1 << (shift - 1))) >> shift) << shift).view(torch.float32)


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(rounded(A, KEPT_BITS), rounded(B, KEPT_BITS))
