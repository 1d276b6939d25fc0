"""Honest, wrongly rejected under --strict: level1/19_ReLU with a plain C++ loop whose error messages say what it
stands in for ("the reference's torch.relu(x)", "as at::relu(x) would"), in a C++ string literal and a Python assert.

The C++ text scan read string literals as code, and the module's strings (a Python message among them) as C++: an
op named in a message was "PyTorch compute" (`torch_compute_ops`, `torch_compute_in_extension`), a rejection under
--strict, though no literal can call anything (a string handed to Python is found by the call that hands it).

True verdict: correct (under --strict too).
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

RELU_CPP = r"""
torch::Tensor relu(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat, "relu: float32 only, as the reference's torch.relu(x) gets");
    TORCH_CHECK(x.is_contiguous(), "relu: a contiguous input (no strides handled here, as at::relu(x) would)");
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
    return out;
}
"""

ext = load_inline(name="rt24_relu_messages", cpp_sources=RELU_CPP, functions=["relu"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        assert x.dim() == 2, "expects the (batch, dim) input that x.relu() gets"
        return ext.relu(x)
