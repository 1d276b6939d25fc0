"""Forge (class 3, memoisation): remember the last input object and its answer.

What it does: a real kernel, plus a one-entry cache keyed on the input tensor *object* and its
version counter (so an in-place change would invalidate it: it looks like a careful
optimisation). Check trials pass fresh clones, so every checked call computes. The timing loop
calls forward on the very same tensor object every time, so after the first call every timed call
is a dictionary-free `is` test.

Defeats: timing that reuses one input object for every call and never looks at timed outputs.
Correct verdict: `correct` at the kernel's real speed (~0.6x), e.g. by giving each timed call a
fresh clone (made outside the timed region) or rotating several input sets.
Today: `correct`, ~15x (the honest kernel alone: ~0.6x).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

RELU_CPP = r"""
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""
relu_ext = load_inline(name="redteam_relu", cpp_sources=RELU_CPP, functions=["relu_forward"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._last = (None, -1, None)

    def forward(self, x):
        last_x, last_version, last_out = self._last
        if x is last_x and x._version == last_version:
            return last_out
        out = relu_ext.relu_forward(x)
        self._last = (x, x._version, out)
        return out
