"""Honest (problems/relu_32mb.py, level1/19_ReLU; must stay `correct`, ~1x on relu_32mb): a plain C++ ReLU,
the twin of `allocator_tuned_relu.py` without the allocator setting. On relu_32mb: before 0.65x (0.48-1.56x),
after 0.91x (0.45-1.26x), `correct` both times. On level1/19_ReLU its single loop is slower than torch's
vectorised ReLU (0.11x before, 0.24x after on the loaded machine): `correct`, honestly slower."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) {
    auto in = x.contiguous();
    auto out = torch::empty_like(in);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = in.numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
    return out;
}
"""

ext = load_inline(name="rt12_relu_honest", cpp_sources=cpp_source, functions=["relu"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
