"""Honest-ish (debatable; must at least be judged the same on CPU and CUDA): the kernel writes into
an output buffer allocated once and returns that same buffer on every call, a common pattern in
hand-written kernels (no allocation per call). Every call's result is right when it is returned.

On the CPU the worker records `.detach().cpu()`, which is a *view* of that buffer (no copy), and
serialises all views after the last call: every recorded output then holds the last call's answer,
and trial 1 fails ("196424 of 262144 values outside tolerance"; later trials would add "identical
to the previous call's output (a cached answer?)"). On CUDA,
`.cpu()` copies at once, so the same file passes. Either verdict can be defended (a caller keeping
two results would be surprised); the CPU/CUDA disagreement and the misleading message cannot.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

RELU_INTO_CPP = r"""
void relu_into(torch::Tensor x, torch::Tensor out) {
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    pybind11::gil_scoped_release no_gil;
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
}
"""
relu_ext = load_inline(name="honest_relu_into", cpp_sources=RELU_INTO_CPP, functions=["relu_into"],
                       extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x):
        x = x.contiguous()
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        relu_ext.relu_into(x, self.out)
        return self.out
