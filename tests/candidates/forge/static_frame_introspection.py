"""Forge (class 7 + 3, static checks / phase detection): look up the call stack, skip the work
when the caller is the timing loop.

What it does: a real kernel for every call whose stack does not contain the worker's timing
function (`time_cpu` / `time_cuda`); when it does, forward() returns a preallocated zero buffer.
sys._getframe is not a "dangerous call" to the static checks, and nothing is replaced or left
running. Zero warnings.

Defeats: static checks blind to introspection; the checked/timed split (timed outputs unchecked).
Correct verdict: `incorrect` (timed calls return zeros) / `rejected` under --strict for stack
introspection. Today: `correct`, ~10x, no static warnings.
"""
import sys

import torch
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


def _being_timed() -> bool:
    frame = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            return False
        if frame.f_code.co_name in ("time_cpu", "time_cuda"):
            return True
        frame = frame.f_back
    return False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.junk = None

    def forward(self, x):
        if _being_timed():
            if self.junk is None:
                self.junk = torch.zeros_like(x)
            return self.junk
        return relu_ext.relu_forward(x)
