"""Trust3 honest (must stay `correct` under --strict): a local nn.Module base class defined once, and a
context manager whose `__exit__` returns None (it never swallows), around a real kernel call.
"""
import time

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


class Timed:
    def __enter__(self):
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.started


class Base(nn.Module):
    def kernel(self, x):
        return relu_ext.relu_forward(x.contiguous())


class ModelNew(Base):
    def forward(self, x):
        with Timed():
            return self.kernel(x)
