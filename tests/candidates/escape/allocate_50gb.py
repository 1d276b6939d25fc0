"""Escape: allocates and touches 50 GB."""
import torch
import torch.nn as nn

hog = torch.ones(50 * (1 << 30), dtype=torch.uint8)


class ModelNew(nn.Module):
    def forward(self, x):
        return x.relu()
