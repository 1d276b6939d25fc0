"""A 256x256 matmul whose forward first scales its first input in place (the caller sees `a` halved): a problem
that mutates its inputs, as the evaluator allows (its candidates may, too)."""

import torch
import torch.nn as nn

N = 256


class Model(nn.Module):
    def forward(self, a, b):
        a.mul_(0.5)
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
