"""A scale done in place (x.mul_(2), as an nn.ReLU(inplace=True) or a `x += bias` head does): the output is the
input tensor itself, but every one of its 64 MB is written by the call. The speed-of-light floor counted an output
sharing memory with an input as nothing to write (a view: tests/candidates/redteam28/honest_flatten_returns_a_view.py),
which holds only where the input is left as it was."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul_(2.0)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
