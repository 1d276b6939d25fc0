"""Honest twin of slowed_control.py (redteam5): the same 2x-slow ReLU (a ReLU and a copy), leaving the
control alone. Must stay `correct`, with a headline below 1 ("slower")."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x).clone()
