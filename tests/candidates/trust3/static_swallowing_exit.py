"""Trust3 attack (static checks): a fallback hidden in a home-made context manager. `Quietly.__exit__`
returns True, which swallows any exception of its block; forward runs the kernel inside it and falls
back to `x * (x > 0)` when it raised (here: always, since the kernel is called with a wrong argument).
Only try/except and contextlib.suppress counted as fallbacks.

Before: `correct` under --strict, no warning. Correct: `rejected` under --strict (try_except_fallback).
"""
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


class Quietly:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


class ModelNew(nn.Module):
    def forward(self, x):
        with Quietly():
            return relu_ext.relu_forward(x, x)
        return x * (x > 0)
