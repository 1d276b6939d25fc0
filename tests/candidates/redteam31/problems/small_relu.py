"""A ReLU of 64K floats: a call is tens of microseconds, less than one round's fixed work (the command, the
tripwires, writing the round's file) spread over a few calls."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(256, 256)]


def get_init_inputs():
    return []
