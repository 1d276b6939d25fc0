"""Trust3 attack (static checks): ModelNew subclasses a local class whose name is later rebound to the
reference. `class Base(nn.Module)` is defined (so the checker took `Base` for a local nn.Module), then
`Base = sys.modules["kevin_reference"].Model`: `class ModelNew(Base)` inherits the reference's forward.
It builds relu_ext so that it has a kernel.

Before: `correct` under --strict, no warning. Correct: `rejected` under --strict (subclass_reference).
"""
import sys

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        o[i] = in[i] > 0.f ? in[i] : 0.f;
    }
    return out;
}
"""
relu_ext = load_inline(name="relu_ext", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O2"])


class Base(nn.Module):
    pass


Base = sys.modules["kevin_reference"].Model


class ModelNew(Base):
    pass
