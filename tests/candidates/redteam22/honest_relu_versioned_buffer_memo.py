"""Honest (must stay `correct`): ReLU that answers from memory when it is called again on the same input object
whose version counter has not moved since (every in-place write through torch moves it on). The twin of
relu_memo_from_third_use.py: every in-place trial, the last one after the timed calls included, reuses the same
objects, and this memo misses on each of them.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kept = x.__dict__.get("_rt22_kept")
        if kept is not None and kept[0] == x._version:
            return kept[1].clone()
        out = torch.relu(x)
        x.__dict__["_rt22_kept"] = (x._version, out.clone())
        return out
