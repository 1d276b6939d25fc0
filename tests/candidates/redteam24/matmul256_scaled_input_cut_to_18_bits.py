"""Red team 24 (precision loss not reported): on a problem whose forward scales its first input in place
(problems/matmul256_scales_its_input.py), C = (A / 2) @ B with both operands rounded to 18 mantissa bits, red team
22's cut. The reference worker's forward ran on the very tensors it kept as the trial's inputs (on the CPU moving
them to the device is no copy), so the float64 result of a trial, which the precision evidence and the judge's
float64 fallback measure against, was computed from inputs already halved: both the candidate's and the float32
reference's errors against it were ~100x the tolerance, in the same ratio, so no warning, and the rounded-inputs
probe never ran. Under --no-timing (the trial the only measurement) `correct` with no `lower_precision`.

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
        A.mul_(0.5)
        return torch.matmul(rounded(A, KEPT_BITS), rounded(B, KEPT_BITS))
