"""Red team 32 (an honest kernel rejected): problems/spike_difference_matvec.py's weight @ spikes as a kernel
computes it with 16 float32 accumulators a row (each adds every 16th product, in order; the lanes are then added in
double), as a vectorised CPU loop or a warp's lanes do: the reference's own float32 sum in another order, erring
~4e-4 against float64 where the float32 reference errs ~1e-3.

True verdict: correct. Got before the fix: incorrect, "113 of 128 values outside tolerance" (the draws of the
reference's own error nudged the int8 input only, so they repeated the judged call's error)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor lanes_matvec(torch::Tensor W, torch::Tensor spikes) {
    const int64_t M = W.size(0), K = W.size(1);
    TORCH_CHECK(K % 16 == 0, "K must be a multiple of 16");
    auto out = torch::empty({M, 1}, W.options());
    const float* w = W.data_ptr<float>();
    const int8_t* s = spikes.data_ptr<int8_t>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i) {
        const float* row = w + i * K;
        volatile float acc[16] = {0};
        for (int64_t k = 0; k < K; k += 16)
            for (int l = 0; l < 16; ++l) acc[l] = acc[l] + row[k + l] * (float)s[k + l];
        double total = 0;
        for (int l = 0; l < 16; ++l) total += acc[l];
        o[i] = (float)total;
    }
    return out;
}
"""

ext = load_inline(name="redteam32_lanes_spike_matvec", cpp_sources=cpp_source, functions=["lanes_matvec"],
                  extra_cflags=["-O2"])  # fmt: skip

M = 128
K = 131072


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(1 + 1e-3 * torch.randn(M, K))

    def forward(self, spikes: torch.Tensor) -> torch.Tensor:
        return ext.lanes_matvec(self.weight.detach().contiguous(), spikes.contiguous())
