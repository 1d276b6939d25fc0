"""A C++ kernel for the backward problem of tinylm's GeluGate (`optimize --backward`): from x and
grad_output, the gradients of x and of up.weight, up.bias, down.weight, down.bias, in one extension
call. ModelNew holds the block's parameters under `block.`, as the backward problem's Model does."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <vector>

std::vector<torch::Tensor> gelu_gate_vjp(torch::Tensor x, torch::Tensor grad, torch::Tensor up_w, torch::Tensor up_b,
                                         torch::Tensor down_w) {
    const double k = 0.7978845608028654;  // sqrt(2 / pi)
    auto flat = x.reshape({-1, x.size(-1)});
    auto g = grad.reshape({-1, grad.size(-1)});
    auto parts = at::addmm(up_b, flat, up_w.t()).chunk(2, -1);
    auto value = parts[0], gate = parts[1];
    auto t = at::tanh(k * (gate + 0.044715 * gate * gate * gate));
    auto act = 0.5 * gate * (1 + t);
    auto dact = 0.5 * (1 + t) + 0.5 * gate * (1 - t * t) * k * (1 + 3 * 0.044715 * gate * gate);
    auto dp = g.mm(down_w);
    auto dh = at::cat({dp * act, dp * value * dact}, -1);
    return {dh.mm(up_w).reshape(x.sizes()), dh.t().mm(flat), dh.sum(0), g.t().mm(value * act), g.sum(0)};
}
"""

vjp = load_inline(name="tinylm_gelu_gate_vjp", cpp_sources=cpp_source, functions=["gelu_gate_vjp"],
                  extra_cflags=["-O2"])  # fmt: skip


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden)
        self.down = nn.Linear(hidden, dim)


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.block = Block(dim, hidden)

    def forward(self, x, grad_output):
        block = self.block
        return tuple(vjp.gelu_gate_vjp(x, grad_output, block.up.weight, block.up.bias, block.down.weight))
