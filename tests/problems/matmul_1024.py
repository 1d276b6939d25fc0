"""A 1024x1024 matmul in KernelBench form: enough work per call (~2 GFLOP) that skipping it shows."""
import torch
import torch.nn as nn

N = 1024


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
