"""Red team 30 (a wrong kernel passed by the float64 fallback's spread allowance): on problems/matvec_two_scales.py
it computes the rows whose entries are large exactly (float64 accumulation) and returns 0 for every row whose
largest entry is under 1e-3, half the outputs, without reading them. Those outputs are ~4e-4 (up to ~1.2e-3) where
the tolerance is 1e-4: `incorrect` by the tolerance ("values outside tolerance"), and the float32 reference's own
error there is ~1e-9. The fallback allows at each place 4 times the reference's root mean square error over the
tensor's other places, and the large rows' ~1e-3 rounding makes that ~3e-3 at the small rows too.

True verdict: incorrect (half the outputs are not computed). Seen: correct, with no lower_precision (the float32
reference's own error is past the tolerance near zero in the large rows, so the bar is 10 times that)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <cmath>

torch::Tensor matvec(torch::Tensor A, torch::Tensor B) {
    const int64_t M = A.size(0), K = A.size(1);
    auto out = torch::zeros({M, 1}, A.options());
    const float* a = A.data_ptr<float>();
    const float* b = B.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i) {
        const float* row = a + i * K;
        float largest = 0.0f;
        for (int64_t k = 0; k < 64; ++k) largest = std::fmax(largest, std::fabs(row[k]));
        if (largest < 1e-3f) continue;  // "negligible" rows: left at zero
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += (double)row[k] * b[k];
        o[i] = (float)acc;
    }
    return out;
}
"""

ext = load_inline(name="redteam30_skips_small_rows", cpp_sources=cpp_source, functions=["matvec"],
                  extra_cflags=["-O2"])  # fmt: skip


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.matvec(A.contiguous(), B.contiguous())
