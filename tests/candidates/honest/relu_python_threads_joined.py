"""Honest (must stay `correct`): forward() runs the C++ kernel on two halves of the batch in two
Python threads, and joins both before returning. Nothing outlives the call.
"""
import threading

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
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        half = x.shape[0] // 2
        parts = [(x[:half], out[:half]), (x[half:], out[half:])]
        threads = [threading.Thread(target=relu_ext.relu_into, args=part) for part in parts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out
