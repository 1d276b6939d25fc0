"""Honest (must stay `correct`, KernelBench level2/14_Gemm_Divide_Sum_Scaling): the chain
matmul -> /2 -> sum over the hidden dim -> *scale simplifies to one matrix-vector product with the
weight's column sums, (x @ W.sum(0)) * scale / 2: hidden_size times fewer flops than the reference
does. Faster than the reference's work allows, and legitimate: at sizes where that shows on a GPU,
the speed-of-light check once rejected it as impossible; it is a warning now."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return (x @ self.weight.sum(0, keepdim=True).T) * (self.scaling_factor / 2)
