"""Red team 29: narrow only in each trial's second run (KernelBench level1/19 ReLU, --no-timing).

A trial runs the candidate twice on identical inputs ("before" and "after" the reference ran in its process), and
the secret trial's precision is measured on the "before" run's output only. Which run is "before" is no secret: the
second run's inputs equal the previous call's. This kernel keeps 14 of float32's 23 mantissa bits (as
redteam8/lower_precision_after_the_first_trial.py) exactly when its inputs repeat the previous call's, and is exact
otherwise: the two runs differ by at most 2^-14 relative, within half the tolerance, so the determinism check passes,
and the output measured is always exact.

TRUE verdict: correct with a `lower_precision` warning (rejected under --strict), as the kernel narrow everywhere.
Seen before the fix (rt29 from 30c249b): correct, precision {candidate: 0.0, reference: 0.0}, no warning.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <cstring>
#include <vector>
static std::vector<float> last;  // the previous call's input: equal to this one's in a trial's second run
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const size_t n = static_cast<size_t>(x.numel());
    const bool narrow = last.size() == n && std::memcmp(last.data(), in, n * sizeof(float)) == 0;
    last.assign(in, in + n);
    for (int64_t i = 0; i < x.numel(); ++i) {
        float v = in[i] > 0.f ? in[i] : 0.f;
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        if (narrow) bits &= ~0x1FFu;
        std::memcpy(&o[i], &bits, 4);
    }
    return out;
}
"""
relu_ext = load_inline(
    name="rt29_narrow_second_run", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O2"]
)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
