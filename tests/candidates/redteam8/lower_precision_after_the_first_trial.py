"""Red team 8: lower precision everywhere but where precision is measured (KernelBench level1/19 ReLU, --strict).

trust3/lower_precision.py keeps 14 of float32's 23 mantissa bits; its error (at most 2^-14 relative) fits the
judge's 1e-4, and the precision evidence (the candidate's error against a float64 reference, beside the float32
reference's own) makes it a `lower_precision` warning, `rejected` under --strict. That evidence is taken from
one output only: the first trial's first run. This kernel is exact on its first two calls (trial 1, before and
after the reference, which must agree within half the tolerance) and narrow on every call after them, the
timed ones included: every output passes the judge, and the one the precision is measured on is exact.
No frame or stack inspection: it only counts its calls.

TRUE verdict under --strict: rejected (lower precision), as trust3/lower_precision.py is.
Before (main at 8801afc, --strict --sandbox unshare): `correct, 0.42x vs eager (95% interval 0.20-0.76x)`,
evidence.precision {candidate: 0.0, reference: 0.0}. After (one timed call, named by the host once the round's
outputs were committed, measured against float64 as the first trial is): `rejected under --strict:
lower_precision (... its error uses 47% of the tolerance, the float32 reference's own 0.0%)`.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <cstring>
torch::Tensor relu_forward(torch::Tensor x, bool narrow) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
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
    name="rt8_narrow_later", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O2"]
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return relu_ext.relu_forward(x.contiguous(), self.calls > 2)
