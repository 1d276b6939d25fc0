"""Honest (must stay `correct`): level1/23_Softmax with a one-pass "online" softmax in C++ (running
max and a rescaled running sum, then one normalising pass): a different summation order and a
different rounding from torch's softmax.

Problem: kernelbench:level1/23_Softmax (x: 16x16384, softmax over dim 1).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOFTMAX_CPP = r"""
#include <cmath>
#include <limits>
torch::Tensor softmax_rows(torch::Tensor x) {
    auto xc = x.contiguous();
    const int64_t rows = xc.size(0), cols = xc.size(1);
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* v = in + r * cols;
        float m = -std::numeric_limits<float>::infinity(), s = 0.f;
        for (int64_t c = 0; c < cols; ++c) {
            if (v[c] > m) { s = s * std::exp(m - v[c]) + 1.f; m = v[c]; }
            else s += std::exp(v[c] - m);
        }
        const float inv = 1.f / s;
        for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = std::exp(v[c] - m) * inv;
    }
    return out;
}
"""
softmax_ext = load_inline(name="honest_softmax_online", cpp_sources=SOFTMAX_CPP, functions=["softmax_rows"],
                          extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax_ext.softmax_rows(x)
