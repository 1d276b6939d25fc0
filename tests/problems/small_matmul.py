"""A small matmul in KernelBench form: 2*M*N*K flops, (M*K + K*N + M*N)*4 bytes."""
import torch
import torch.nn as nn

M, K, N = 64, 32, 16


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
