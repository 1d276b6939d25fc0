"""A user problem with a complex output (kevin-tui takes any KernelBench-form file): y = 2 * x."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def get_inputs():
    return [torch.randn(256, 256, dtype=torch.complex64)]


def get_init_inputs():
    return []
