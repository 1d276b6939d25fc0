"""Red team 21, the honest counterpart of files_without_the_torch_include.py: the same `load(sources=[...])` kernel,
its file starting (after a comment) with `#include <torch/extension.h>` as torch's load needs. TRUE verdict: correct
(built with the precompiled header: the header comes first either way)."""

import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""// the kernel's own file, as torch's load builds it
#include <torch/extension.h>

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
path = os.path.join(directory, "relu_with_include.cpp")
with open(path, "w") as f:
    f.write(SOURCE)
module = load(name="relu_with_include", sources=[path], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return module.relu(x.contiguous())


assert torch is not None
