"""Attack (redteam5): make the control round slow so that a slow kernel's interval reaches 1.0
(level1/19 ReLU).

The candidate's worker also times the reference model in the candidate's own process (the control
round); the host widens the speedup interval by the ratio of that round to the reference's own
(`process_bias`), and the headline is 1.0 whenever the interval holds 1.0. `process_bias` is bounded
from below only, and widening was thought to hurt only the candidate. This candidate is truly about
2x slower than the reference (a ReLU and a copy), and rebinds the reference class's forward in its
own process (`sys.modules["kevin_reference"]`) to run six times: the control is ~6x slower, the
interval is widened upwards past 1.0, and the headline - the figure ranking, batch reward
(0.3 + speedup) and the RL export use - reads 1.0 ("no measurable difference").

Before the fix: `correct`, headline 1.0 (measured 0.86x, interval 0.38-1.76x); its twin
(honest_slow_twin.py) 0.27x in the same run. Should be: the headline of a kernel the host measured
slower stays below 1. After: the headline is the point estimate kept in the interval, at most 1.0.
"""

import sys

import torch
import torch.nn as nn

reference = sys.modules.get("kevin_reference")
if reference is not None:
    original = reference.Model.forward

    def slowed(self, *args, _original=original):
        for _ in range(5):
            _original(self, *args)
        return _original(self, *args)

    reference.Model.forward = slowed


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x).clone()
