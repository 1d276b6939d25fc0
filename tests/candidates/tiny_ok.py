"""Legitimate on tiny_output: the same maths, in a different order."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        e = torch.exp(-2 * x)
        return (1 - e) / (1 + e) * self.scale
