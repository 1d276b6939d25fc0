"""Red team 21: an honest kernel more exact than the reference on a complex output (tests/problems/
complex_rounded_sum.py): the row sums of z, (z + 1e4) - 1e4 being z, accumulated in float64 and rounded once.

TRUE verdict: correct (inside the tolerance plus the float32 reference's own error of the float64 result).
Before (main 44b8e6d): `incorrect`, values outside tolerance (the float64 fallback judged real float tensors only).
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a):
        return torch.view_as_complex(a.double().sum(1)).to(torch.complex64)
