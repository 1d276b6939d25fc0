"""Attack (redteam5): PyTorch compute inside the C++ extension, hidden from the runtime op count
(level1/19 ReLU, --strict).

Under --strict, PyTorch compute must go into the kernel: the static checks read the Python code, and
the runtime op count (a TorchDispatchMode in the candidate's process) sees aten ops a C++ function
dispatches. This C++ function excludes the Python dispatch keys for its own scope
(`c10::impl::ExcludeDispatchKeyGuard`), so the `at::relu` it calls never reaches the mode; the static
checks never read the C++ text at all. The "kernel" is PyTorch's own relu.

Before the fix: `correct` under --strict, no warning about PyTorch compute.
Should be: `rejected` under --strict (PyTorch compute in the C++ source).
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor relu_forward(torch::Tensor x) {
    c10::impl::ExcludeDispatchKeyGuard quiet(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
    return at::relu(x);
}
"""

ext = load_inline(name="rt5_hidden_aten", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
