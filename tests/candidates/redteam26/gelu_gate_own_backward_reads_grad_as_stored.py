"""Red team 26, left open by it (the layout of the gradient a kernel's own autograd backward gets): GeluGate's
kernel with its own backward (an autograd.Function, installed with BACKWARD = "kernel") that reads grad_output's
memory as a contiguous array, as `grad_output.data_ptr<float>()` does. eval judges the forward; `apply --check`'s
loss of random weights on the block alone sends it dense gradients: right there. In training, autograd hands it
whatever gradient the graph after the block makes (a sequence-first model's transpose gives a transposed one).

True behaviour: the installed kernel gives the block's gradients for any layout of the gradient. Got: wrong
gradients for a transposed one, before the installed forward made the gradients into its outputs contiguous.
"""

import torch
import torch.nn.functional as F
from torch import nn


def as_stored(t: torch.Tensor) -> torch.Tensor:
    """t's storage read in order, as a raw pointer into it reads it."""
    return torch.as_strided(t, t.shape, torch.empty(t.shape).stride(), t.storage_offset())


class GeluGate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, up_weight, up_bias, down_weight, down_bias):
        value, gate = F.linear(x, up_weight, up_bias).chunk(2, dim=-1)
        ctx.save_for_backward(x, up_weight, up_bias, down_weight)
        return F.linear(value * F.gelu(gate, approximate="tanh"), down_weight, down_bias)

    @staticmethod
    def backward(ctx, grad):
        x, up_weight, up_bias, down_weight = ctx.saved_tensors
        g = as_stored(grad)
        with torch.enable_grad():
            inputs = [t.detach().requires_grad_() for t in (x, up_weight, up_bias, down_weight)]
            value, gate = F.linear(inputs[0], inputs[1], inputs[2]).chunk(2, dim=-1)
            hidden = value * F.gelu(gate, approximate="tanh")
            grads = torch.autograd.grad(F.linear(hidden, inputs[3]), inputs, g)
        return (*grads, g.reshape(-1, g.shape[-1]).sum(0))


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return GeluGate.apply(x, self.up.weight, self.up.bias, self.down.weight, self.down.bias)
