"""Red team 9, HONEST (tests/problems/softmax_mass.py: each row's softmax summed, which is exactly 1): a kernel
that knows the algebra and returns ones. The float32 reference's own rounding makes its rows vary around 1 by
~1e-7, and the judge's "constant output where the reference varies" check took the exact answer for a
constant guess; that check is not one the float64 fallback looked at.

TRUE verdict: correct (exact: float64 gives 1 to 1e-16).
Before: incorrect, "constant output 1 where the reference varies".
After: correct (a constant output passes when the float64 result is constant to within the float32
reference's own rounding and it is as close to it as the reference is).
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ones(x.shape[0], dtype=x.dtype, device=x.device)
