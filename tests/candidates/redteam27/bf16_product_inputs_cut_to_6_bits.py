"""Red team 27 (precision loss not reported, bfloat16): a * b with the bf16 input `b` rounded to 6 explicit mantissa
bits first (bf16 keeps 7), as a kernel reading its operands in a narrower format would. Its error stays inside
bf16's 1e-2 tolerance, and the precision evidence cannot see it: the 10x ratio cannot fire for bf16 (the bf16
reference's own rounding already uses ~20% of the tolerance), and the rounded-inputs probe rounded float32
operands only.

True verdict: correct with a `lower_precision` warning (a rejection under --strict). Got: correct, no warning.
"""

import torch
from torch import nn

KEPT_BITS = 6


def rounded(t: torch.Tensor, bits: int) -> torch.Tensor:
    """To nearest, ties to even, as a conversion to a narrower format rounds (on the value as float32)."""
    shift = 23 - bits
    i = t.float().contiguous().view(torch.int32)
    i = i + (1 << (shift - 1)) - 1 + ((i >> shift) & 1)
    return ((i >> shift) << shift).view(torch.float32).to(t.dtype)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * rounded(b, KEPT_BITS)
