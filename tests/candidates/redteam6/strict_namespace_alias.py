"""Attack (redteam6): PyTorch's own CPU kernel called from C++ through a namespace alias, under --strict.

`namespace kc = at::cpu;` and `kc::clamp_min(x, 0)` never spell a call as `at::...(`, so the C++ text scan
finds nothing, and `at::cpu::` kernels skip the dispatcher, so the runtime op count sees nothing either (a
using-declaration or a macro hide it the same way). Before: `correct` under --strict, no warning, the profile
crediting the "kernel" with all the time. Now: `rejected` (torch_compute_in_extension), read from the symbols
the built library imports, however the source spelt them."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <ATen/CPUFunctions.h>
namespace kc = at::cpu;

torch::Tensor relu_forward(torch::Tensor x) {
    return kc::clamp_min(x, 0);
}
"""

ext = load_inline(name="rt6_ns_alias", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
