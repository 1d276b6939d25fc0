"""Red team 28 (an honest float32 kernel judged `incorrect`): the textbook inclusive scan, one float32 running sum per
row, on KernelBench level1/89 (cumsum of 4000 values). torch's CPU cumsum accumulates a float32 input in float64 and
rounds each output once, so the reference's own error is ~0.06% of fp32's 1e-4 tolerance, while a float32 running sum
over 4000 terms uses ~90% of it, and more at the odd value: 11 of 20 draws have one outside it. The judge's float64
fallback widens the tolerance by the reference's own error only, which is nil here. Where every trial passes, its
share is ~1400x the reference's, and `lower_precision` fires by size alone ("computes in lower precision?": a rejection
under --strict), though it computes in float32, the problem's precision, as torch's own CUDA cumsum does.

True verdict: correct with no `lower_precision` warning. Got: incorrect, "wrong output in trial 1 (before the
reference): 5 of 512000 values outside tolerance".
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor scan(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const int64_t rows = x.size(0), n = x.size(1);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        float running = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
            running += in[r * n + i];
            o[r * n + i] = running;
        }
    }
    return out;
}
"""

ext = load_inline(name="redteam28_float32_scan", cpp_sources=cpp_source, functions=["scan"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        assert dim == 1, "rows are scanned along dim 1"

    def forward(self, x):
        return ext.scan(x.contiguous())
