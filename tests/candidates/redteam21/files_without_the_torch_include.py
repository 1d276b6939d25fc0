"""Red team 21: a `load(sources=[...])` kernel whose C++ file never includes <torch/extension.h> yet uses torch::
and PYBIND11_MODULE. torch's own `load` cannot build it ("'torch' does not name a type"); the evaluator's builder
puts its precompiled header first (`-include`) on every compile line, so whether it builds depended on whether a
header for these flags was in the cache (none when the store is full and the flag set new, or the header's step
failed), and the build key does not say which.

TRUE verdict: compile_error (the file does not build as written). Before (main 44b8e6d): `correct` (the header
for ReLU's default flags was in the cache). After: compile_error "'torch' does not name a type" (remembered: 0.002 s the next time).
"""

import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
"""

directory = tempfile.mkdtemp()
path = os.path.join(directory, "relu_no_include.cpp")
with open(path, "w") as f:
    f.write(SOURCE)
module = load(name="relu_no_include", sources=[path], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return module.relu(x.contiguous())


assert torch is not None
