"""Red team 26 (layouts the installed backward kernel is given): a kernel for GeluGate's backward problem that
reads grad_output's memory as a contiguous array (as `grad_output.data_ptr<float>()` does). The backward problem
draws grad_output contiguous, and so does `apply --check`'s loss of random weights on the block alone: `correct`,
check passed. In training, autograd hands the operator's backward whatever gradient the graph after the block makes
(a sequence-first model's transpose gives a transposed one); the installed operator passed it on as it was: wrong
gradients, silently.

True verdict: the installed backward kernel gives the block's gradients for any layout of grad_output. Got: wrong
gradients for a transposed grad_output.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

K = math.sqrt(2.0 / math.pi)


def as_stored(t: torch.Tensor) -> torch.Tensor:
    """t's storage read in order, as a raw pointer into it reads it."""
    return torch.as_strided(t, t.shape, torch.empty(t.shape).stride(), t.storage_offset())


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden)
        self.down = nn.Linear(hidden, dim)


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.block = Block(dim, hidden)

    def forward(self, x: torch.Tensor, grad_output: torch.Tensor):
        up, down = self.block.up, self.block.down
        rows = x.reshape(-1, x.shape[-1])
        g = as_stored(grad_output).reshape(-1, grad_output.shape[-1])
        value, gate = F.linear(rows, up.weight, up.bias).chunk(2, dim=-1)
        t = torch.tanh(K * (gate + 0.044715 * gate**3))
        gelu = 0.5 * gate * (1 + t)
        dgelu = 0.5 * (1 + t) + 0.5 * gate * (1 - t * t) * K * (1 + 3 * 0.044715 * gate * gate)
        da = g.mm(down.weight)
        dh = torch.cat([da * gelu, da * value * dgelu], dim=-1)
        dx = dh.mm(up.weight).reshape(x.shape)
        return dx, dh.t().mm(rows), dh.sum(0), g.t().mm(value * gelu), g.sum(0)
