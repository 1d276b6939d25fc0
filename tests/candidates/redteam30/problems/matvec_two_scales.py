"""A matrix-vector product over a long reduction (K = 131072, as KernelBench level1/4) whose matrix has rows at two
scales: the first half of its rows are standard normal, the second half a millionth of that (unnormalised features,
a module's own inputs). Each output of a large row is a 131072-term float32 dot product whose rounding (~1e-3) is past
fp32's 1e-4 tolerance near zero; each output of a small row is ~4e-4 and the float32 reference rounds it to ~1e-9."""

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
    A = torch.randn(M, K)
    A[M // 2 :] *= 1e-6
    return [A, torch.randn(K, 1)]


def get_init_inputs():
    return []
