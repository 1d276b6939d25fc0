import torch
from torch import nn


class DropGate(nn.Module):
    """A projection, GELU and dropout: dropout only acts in training."""

    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(torch.nn.functional.gelu(self.proj(x)))
