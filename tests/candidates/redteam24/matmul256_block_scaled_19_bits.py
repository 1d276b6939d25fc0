"""Red team 24 (precision loss not reported): C = A @ B with both inputs in a block floating-point format (as MX and
block-scaled int formats store them): each run of 32 values along K shares one power-of-two scale, and each value
keeps 19 fraction bits below its block's largest binade, so the smaller values of a block keep fewer. On
tests/problems/matmul_256.py its error against float64 uses ~6x the float32 reference's share of the tolerance (under
the 10x ratio); the rounded-inputs probe rounds each value by its own exponent, which matches it on no width:
`correct` with no `lower_precision` warning.

True verdict: correct with a `lower_precision` warning (a rejection under --strict).
"""

import torch
from torch import nn

FRACTION_BITS, BLOCK = 19, 32


def block_scaled(t: torch.Tensor, dim: int) -> torch.Tensor:
    x = t.transpose(dim, -1).contiguous()
    blocks = x.reshape(-1, BLOCK)
    scale = torch.exp2(torch.floor(torch.log2(blocks.abs().amax(1, keepdim=True))) - FRACTION_BITS)
    return (torch.round(blocks / scale) * scale).reshape(x.shape).transpose(dim, -1).contiguous()


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(block_scaled(A, 1), block_scaled(B, 0))
