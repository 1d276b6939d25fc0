"""A bfloat16 matmul (4096 x 1024 by 1024 x 64): 262,144 bf16 outputs, each one float32 sum rounded once."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(4096, 1024).to(torch.bfloat16), torch.randn(1024, 64).to(torch.bfloat16)]


def get_init_inputs():
    return []
