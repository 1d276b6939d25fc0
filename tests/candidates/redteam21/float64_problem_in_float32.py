"""Red team 21: a float64 problem (tests/problems/relu_and_sums_float64.py) with its ReLU computed in float32 (the
row sums in float64). Rounding to float32 costs at most 2^-24 (6e-8) of each value, inside float64's 1e-7
relative tolerance, so the judge passes it; but it keeps float32's 24 bits where the problem asks for 53, which is
what the `lower_precision` warning is for.

TRUE verdict: correct with a `lower_precision` warning (rejected under --strict).
Before (main 44b8e6d): `correct`, no `lower_precision`, no precision evidence (judge.tolerance_share skipped every
float64 output). After: `lower_precision`, precision {candidate 0.45, reference 0.0}.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x.float()).to(x.dtype), x.sum(-1)
