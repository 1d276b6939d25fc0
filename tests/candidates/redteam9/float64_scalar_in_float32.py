"""Red team 9 (a float64 problem returning a Python number, e.g. `x.sum().item()` of a float64 tensor): the
sum computed in float32 (a float16 one is caught: 1e-2 off). A Python float is judged with the
tolerance of torch's default dtype (float32: 1e-4 relative) whatever dtype the reference computed it in,
so a float64 problem's scalar is judged ~1000x more loosely than its tensor outputs (1e-7) would be.

TRUE verdict: incorrect (at the float64 tolerance the problem's dtype implies).
Got: see /work/notes/redteam9.md (not fixed on this branch).
"""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return float(x.float().sum())
