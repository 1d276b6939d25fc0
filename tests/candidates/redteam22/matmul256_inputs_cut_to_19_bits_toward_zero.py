"""C = A @ B with both inputs truncated (rounded toward zero) to 19 explicit mantissa bits, as a kernel masking off
the low bits to pack its operands would compute. On tests/problems/matmul_256.py its error against float64 stays
under the 10x ratio, as the 18-bit cut's does.

True verdict: correct with a `lower_precision` warning naming 19 bits toward zero (a rejection under --strict).
"""

import torch
from torch import nn

KEPT_BITS = 19


def truncated(t: torch.Tensor, bits: int) -> torch.Tensor:
    shift = 23 - bits
    return ((t.contiguous().view(torch.int32) >> shift) << shift).view(torch.float32)


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(truncated(A, KEPT_BITS), truncated(B, KEPT_BITS))
