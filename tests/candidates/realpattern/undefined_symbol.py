"""Real-world pattern: a function declared and bound but never defined; it links, then fails to load."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
torch::Tensor relu_cuda_impl(torch::Tensor x);
torch::Tensor relu_forward(torch::Tensor x) { return relu_cuda_impl(x); }
"""

ext = load_inline(name="relu_undefined_symbol", cpp_sources=source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
