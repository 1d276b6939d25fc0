"""Correct but deliberately slow: ReLU one row at a time in Python, through extra copies."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        rows = [torch.clamp(r.clone().clone(), min=0.0) for r in x.contiguous()]
        return torch.stack(rows).clone()
