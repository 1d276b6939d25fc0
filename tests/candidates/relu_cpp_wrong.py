"""Same extension name as relu_cpp.py, different source: must never reuse relu_cpp's build."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor relu_forward(torch::Tensor x) {
    return x * 2;
}
"""

relu_ext = load_inline(name="relu_ext", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
