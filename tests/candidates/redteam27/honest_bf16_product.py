"""Honest twin of bf16_product_inputs_cut_to_6_bits.py: a * b in float32, rounded once to bfloat16 (exactly what
the reference computes). True verdict: correct with no `lower_precision` warning."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a.float() * b.float()).to(torch.bfloat16)
