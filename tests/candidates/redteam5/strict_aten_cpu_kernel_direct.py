"""Attack (redteam5): PyTorch's own CPU kernel called directly from C++, past the dispatcher
(level1/19 ReLU, --strict).

`at::cpu::clamp_min` is the structured CPU kernel's entry point (ATen/CPUFunctions.h): it runs without
going through the dispatcher, so no dispatch mode (the runtime op count) ever sees it, and the static
checks never read the C++ text. relu(x) = clamp_min(x, 0): the "kernel" is PyTorch's.

Before the fix: `correct` under --strict, no warning about PyTorch compute.
Should be: `rejected` under --strict (PyTorch compute in the C++ source).
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <ATen/CPUFunctions.h>

torch::Tensor relu_forward(torch::Tensor x) {
    return at::cpu::clamp_min(x, 0);
}
"""

ext = load_inline(name="rt5_cpu_direct", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
