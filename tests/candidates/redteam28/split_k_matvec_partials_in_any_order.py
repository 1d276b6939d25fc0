"""Red team 28 (an honest kernel rejected by the determinism check): a split-K matrix-vector product on KernelBench
level1/4's long reduction (K = 131072), as a GPU kernel with float atomics computes it: each of 1024 blocks sums its
128 products in float64 and adds its float partial into the output, in whatever order the blocks finish. Here the
order is a new permutation each call (a call counter's), as a GPU scheduler's would be.

Each run is within the float32 reference's own error of the float64 truth (the judge's fallback passes both: the
reference's own rounding over 131072 terms is ~3e-3, past fp32's 1e-4 tolerance at outputs near zero), but two runs
on identical inputs differ by the partials' rounding in another order (up to ~1e-3), which the determinism check
allows only up to half the tolerance: near zero, 5e-5.

True verdict: correct (an honest kernel; its two runs differ by less than the reference's own error). Got: incorrect,
"two runs on identical inputs disagree ... (uninitialised memory or a race?)".
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <vector>

static uint64_t calls = 0;

torch::Tensor matvec(torch::Tensor A, torch::Tensor B) {
    const int64_t M = A.size(0), K = A.size(1), S = 1024, chunk = K / S;
    TORCH_CHECK(K % S == 0, "K must be a multiple of 1024");
    auto out = torch::empty({M, 1}, A.options());
    const float* a = A.data_ptr<float>();
    const float* b = B.data_ptr<float>();
    float* o = out.data_ptr<float>();
    std::vector<int64_t> order(S);
    for (int64_t s = 0; s < S; ++s) order[s] = s;
    uint64_t state = 0x9E3779B97F4A7C15ull * (++calls);  // the order the blocks finish in: new each launch
    for (int64_t s = S - 1; s > 0; --s) {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17;
        std::swap(order[s], order[state % (uint64_t)(s + 1)]);
    }
    std::vector<float> partial(S);
    for (int64_t i = 0; i < M; ++i) {
        const float* row = a + i * K;
        for (int64_t s = 0; s < S; ++s) {
            double acc = 0;
            for (int64_t k = s * chunk; k < (s + 1) * chunk; ++k) acc += (double)row[k] * b[k];
            partial[s] = (float)acc;
        }
        float total = 0.0f;  // atomicAdd(&o[i], partial) from each block, in the order they finish
        for (int64_t s = 0; s < S; ++s) total += partial[order[s]];
        o[i] = total;
    }
    return out;
}
"""

ext = load_inline(
    name="redteam28_split_k_any_order", cpp_sources=cpp_source, functions=["matvec"], extra_cflags=["-O2"]
)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.matvec(A.contiguous(), B.contiguous())
