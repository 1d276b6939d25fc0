"""Trust3 attack (precision): computes in a lower-precision format that still fits the tolerance. The
kernel keeps 14 of float32's 23 mantissa bits (what storing intermediates in a narrower format does):
its error, at most 2^-14 relative, stays inside the judge's 1e-4, while the float32 reference's own
error against float64 is nil for ReLU.

Before: `correct`, no word about precision, also under --strict. Correct: `correct` with a
`lower_precision` warning; `rejected` under --strict.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <cstring>
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        float v = in[i] > 0.f ? in[i] : 0.f;
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        bits &= ~0x1FFu;
        std::memcpy(&o[i], &bits, 4);
    }
    return out;
}
"""
relu_ext = load_inline(name="trust3_narrow", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
