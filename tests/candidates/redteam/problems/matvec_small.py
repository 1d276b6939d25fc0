"""KernelBench level1/4 (C = A * B, matrix times vector) at an eighth of its size (K = 16384, A is 16 MB
instead of 128 MB): the same memory-bound matrix-vector product for attacks whose point is not the size."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 256
K = 16384


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
