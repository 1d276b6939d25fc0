"""Missing values marked NaN in the input (a sensor layer's mean over what was measured): the inputs hold
NaN by design, so an unchanged input is one whose NaN are still NaN."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nanmean(x, dim=-1)


rows, cols = 256, 1024


def get_inputs():
    x = torch.randn(rows, cols)
    x[torch.rand(rows, cols) < 0.1] = float("nan")
    return [x]


def get_init_inputs():
    return []
