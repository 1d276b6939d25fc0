"""Red team 27 (precision loss not reported, float16): a * b on a float16 problem with `b` taken through
bfloat16 first (7 explicit mantissa bits where float16 keeps 10), as a kernel keeping one operand in bf16 would.
Its error uses ~8x the float16 reference's share of the tolerance, under the 10x ratio, and the rounded-inputs probe
rounded float32 operands only.

True verdict: correct with a `lower_precision` warning (a rejection under --strict). Got: correct, no warning.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * b.to(torch.bfloat16).to(torch.float16)
