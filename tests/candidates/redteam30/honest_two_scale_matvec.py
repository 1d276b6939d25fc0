"""Red team 30's honest twin of skips_the_small_rows.py: the same matrix-vector product on
problems/matvec_two_scales.py, every row summed in float64. Its error against the float64 truth is nil; the float32
reference's own rounding over 131072 terms is past the tolerance near zero in the large rows (the fallback passes it).

True verdict: correct."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor matvec(torch::Tensor A, torch::Tensor B) {
    const int64_t M = A.size(0), K = A.size(1);
    auto out = torch::empty({M, 1}, A.options());
    const float* a = A.data_ptr<float>();
    const float* b = B.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i) {
        const float* row = a + i * K;
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += (double)row[k] * b[k];
        o[i] = (float)acc;
    }
    return out;
}
"""

ext = load_inline(name="redteam30_honest_two_scales", cpp_sources=cpp_source, functions=["matvec"],
                  extra_cflags=["-O2"])  # fmt: skip


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.matvec(A.contiguous(), B.contiguous())
