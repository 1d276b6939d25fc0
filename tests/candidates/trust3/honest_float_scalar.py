"""Honest (must stay `correct`, tests/problems/float_scalar.py): the same sum as a Python float, added
up in another order (rows first), so the last bits differ. Today: `incorrect` — a Python float output
was compared with `!=`."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.view(128, -1).sum(1).sum().item()
