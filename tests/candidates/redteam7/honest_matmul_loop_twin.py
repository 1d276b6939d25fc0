"""Red team 7: the honest twin of lease_defers_the_work.py — the same C++ loop, computed in the call.

Problem: tests/problems/matmul_256.py. TRUE verdict: correct, well below 1x (a plain loop against MKL).
Its measured speed is what lease_defers_the_work.py should get.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstring>

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    a = a.contiguous(); b = b.contiguous();
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
    const float* A = a.data_ptr<float>();
    const float* B = b.data_ptr<float>();
    float* C = c.data_ptr<float>();
    std::memset(C, 0, sizeof(float) * n * m);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < k; ++p) {
            const float av = A[i * k + p];
            const float* brow = B + p * m;
            float* crow = C + i * m;
            for (int64_t j = 0; j < m; ++j) crow[j] += av * brow[j];
        }
    return c;
}
"""

ext = load_inline(
    name="rt7_honest_matmul_loop",
    cpp_sources=cpp_source,
    functions=["matmul_forward"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.matmul_forward(a, b)
