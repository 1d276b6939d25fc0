"""Attack (redteam5): do the kernel's work inside the timing loop's own input mixing, which the host
credits as loop overhead (level1/19 ReLU, 1 MB).

The timing loop in the candidate's process builds every call's input with `torch.lerp(a, b, mask)`
(worker/inputs.py::Mask.mix) before calling forward, and the host subtracts the *reference's* cost of
that loop from the candidate's round time. This candidate rebinds `torch.lerp`: a C++ function reads
the two pool entries and the mask and writes relu(mix) in one pass (what lerp alone costs), returns an
uninitialised placeholder as "the input", and forward hands back the answer made for that placeholder.
Every judged output is exact; the kernel's true speed is about 1x (it is a plain ReLU loop), but the
candidate's round costs what the reference's loop overhead alone costs, so host time minus overhead is
about nothing.

Before (the pool of mixed entries): `correct` at 70.5x [1.39-158] on the loaded 2-core CPU (warnings
monkey_patch, suspicious_speedup, below_speed_of_light, a warning on the CPU). Should be: no speedup the
kernel did not earn. After main's fresh per-call inputs the loop never calls `torch.lerp`, the candidate
runs its honest path: `correct`, headline 1.0 (interval 0.08-7.38x on the loaded machine).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

torch::Tensor mixed_relu(torch::Tensor a, torch::Tensor b, torch::Tensor w) {
    auto out = torch::empty_like(a);
    const float* __restrict__ pa = a.data_ptr<float>();
    const float* __restrict__ pb = b.data_ptr<float>();
    const float* __restrict__ pw = w.data_ptr<float>();
    float* __restrict__ o = out.data_ptr<float>();
    const int64_t n = a.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = pw[i] * pb[i] + (1.f - pw[i]) * pa[i];  // exact for 0/1 weights, no branch
        o[i] = v > 0.f ? v : 0.f;
    }
    return out;
}
"""

ext = load_inline(name="rt5_mixed_relu", cpp_sources=cpp_source, functions=["relu_forward", "mixed_relu"],
                  extra_cflags=["-O3", "-march=native"])

_lerp = torch.lerp
_made = []  # [placeholder, answer] of the latest mix


def _fused(a, b, w=None, *rest, **kwargs):
    plain = (not rest and not kwargs and isinstance(w, torch.Tensor) and a.dtype == b.dtype == w.dtype == torch.float32
             and a.shape == b.shape == w.shape and a.is_contiguous() and b.is_contiguous() and w.is_contiguous())
    if not plain:
        return _lerp(a, b, w, *rest, **kwargs)
    answer = ext.mixed_relu(a, b, w)
    placeholder = torch.empty_like(a)
    _made[:] = [placeholder, answer]
    return placeholder


torch.lerp = _fused


class ModelNew(nn.Module):
    def forward(self, x):
        if _made and x is _made[0]:
            answer = _made[1]
            _made.clear()
            return answer
        return ext.relu_forward(x.contiguous())
