"""tinylm's GeluGate in C++ with its own backward (an autograd.Function over two extension functions):
the kind of kernel whose gradients `kevin-tui apply --check` compares to the reference's before it
uses them. GRAD_UP_BIAS scales one gradient, so a test can make the backward wrong."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

GRAD_UP_BIAS = 1.0

cpp_source = r"""
#include <vector>

const double K = 0.7978845608028654;  // sqrt(2 / pi)

std::vector<torch::Tensor> gelu_gate_forward(torch::Tensor x, torch::Tensor up_w, torch::Tensor up_b,
                                             torch::Tensor down_w, torch::Tensor down_b) {
    auto flat = x.reshape({-1, x.size(-1)});
    auto h = at::addmm(up_b, flat, up_w.t());
    auto parts = h.chunk(2, -1);
    auto gate = parts[1];
    auto product = parts[0] * (0.5 * gate * (1 + at::tanh(K * (gate + 0.044715 * gate * gate * gate))));
    auto sizes = x.sizes().vec();
    sizes.back() = down_w.size(0);
    return {at::addmm(down_b, product, down_w.t()).reshape(sizes), h, product};
}

std::vector<torch::Tensor> gelu_gate_backward(torch::Tensor grad, torch::Tensor x, torch::Tensor up_w,
                                              torch::Tensor down_w, torch::Tensor h, torch::Tensor product) {
    auto flat = x.reshape({-1, x.size(-1)});
    auto g = grad.reshape({-1, grad.size(-1)});
    auto parts = h.chunk(2, -1);
    auto value = parts[0], gate = parts[1];
    auto t = at::tanh(K * (gate + 0.044715 * gate * gate * gate));
    auto act = 0.5 * gate * (1 + t);
    auto dact = 0.5 * (1 + t) + 0.5 * gate * (1 - t * t) * K * (1 + 3 * 0.044715 * gate * gate);
    auto dp = g.mm(down_w);
    auto dh = at::cat({dp * act, dp * value * dact}, -1);
    return {dh.mm(up_w).reshape(x.sizes()), dh.t().mm(flat), dh.sum(0), g.t().mm(product), g.sum(0)};
}
"""

gelu_gate = load_inline(
    name="tinylm_gelu_gate_autograd",
    cpp_sources=cpp_source,
    functions=["gelu_gate_forward", "gelu_gate_backward"],
    extra_cflags=["-O2"],
)


class GeluGateFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, up_w, up_b, down_w, down_b):
        out, h, product = gelu_gate.gelu_gate_forward(x, up_w, up_b, down_w, down_b)
        ctx.save_for_backward(x, up_w, down_w, h, product)
        return out

    @staticmethod
    def backward(ctx, grad):
        dx, dup_w, dup_b, ddown_w, ddown_b = gelu_gate.gelu_gate_backward(grad.contiguous(), *ctx.saved_tensors)
        return dx, dup_w, dup_b * GRAD_UP_BIAS, ddown_w, ddown_b


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return GeluGateFunction.apply(x, self.up.weight, self.up.bias, self.down.weight, self.down.bias)
