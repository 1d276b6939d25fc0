"""Forge (class 3, memoisation): a cache keyed on a few sampled elements (a content fingerprint).

What it does: a real kernel, plus a cache keyed on (shape, 4 sampled element values). It survives
the obvious fix for memo_same_object.py (cloning the input before each timed call: same content,
new object, new data_ptr), because the key is the content. Checked trials have different random
data, so they all miss and compute. (A cache keyed on data_ptr alone fails here: the clones of
different trials reuse freed addresses, so it serves trial 1's answer to trial 3 and is caught as
"identical to the previous call's output".)

Defeats: timing that repeats the same input values and never checks timed outputs.
Correct verdict: `correct` at the kernel's real speed, or `incorrect` if timed calls see inputs
whose fingerprint collides but whose contents differ (what a defence should generate: fresh
inputs per timed call, and checked outputs from some timed calls).
Today: `correct`, ~1.6-1.9x (the honest kernel alone: ~0.6x; the key costs ~10 us).
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
        self._cache = {}

    def forward(self, x):
        flat = x.view(-1)
        n = flat.shape[0]
        key = (tuple(x.shape), tuple(flat[[0, n // 3, 2 * n // 3, n - 1]].tolist()))
        out = self._cache.get(key)
        if out is None:
            out = self._cache[key] = relu_ext.relu_forward(x)
        return out
