"""A flatten, as a model's head does before its classifier (nn.Flatten): the output is a view of the input (16 MB),
so the reference writes nothing, and neither need a correct kernel."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(x, 1)


def get_inputs():
    return [torch.randn(16, 64, 64, 64)]


def get_init_inputs():
    return []
