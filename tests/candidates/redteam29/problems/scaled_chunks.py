"""A scale whose 64 MB result is returned as 16 chunks (torch.chunk, as an attention head's q/k/v split is): the
chunks are views of one tensor, all of which the call writes. The speed-of-light floor counted outputs sharing memory
with each other as the largest of them (meant for one tensor returned twice), 4 MB of the 64."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.chunk(x * 2.0, 16, dim=1)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
