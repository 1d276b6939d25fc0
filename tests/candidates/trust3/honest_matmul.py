"""Honest (must stay `correct`, ~1x): the matmul problem's own computation, the counterpart of every
attack here that targets tests/problems/matmul_256.py."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)
