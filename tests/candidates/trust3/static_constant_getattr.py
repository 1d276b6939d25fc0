"""Trust3 attack (static checks): PyTorch compute under a constant name. It builds the honest relu_ext
(so "has a kernel" is true) and never calls it: forward is `getattr(torch, "relu")(x)`. The checker only
flagged getattr with a *computed* name, and a constant one resolved to nothing.

Before: `correct` under --strict, no warning. Correct: `rejected` under --strict (torch_compute_ops).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        o[i] = in[i] > 0.f ? in[i] : 0.f;
    }
    return out;
}
"""
relu_ext = load_inline(name="relu_ext", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return getattr(torch, "relu")(x)
