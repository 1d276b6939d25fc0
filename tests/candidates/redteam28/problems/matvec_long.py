"""KernelBench level1/4 (C = A * B, matrix times vector) with half its rows (M = 128, K = 131072: A is 64 MB
instead of 128 MB): each output is the same 131072-term float32 dot product, so the reference's own
rounding is as large as there, for a test whose point is the length of the reduction, not the row count."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 128
K = 131072


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
