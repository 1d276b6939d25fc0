"""Real-world pattern: the build fails (an undeclared name), the candidate catches it and falls back to PyTorch."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    undeclared_name(out);
    return out;
}
"""

try:
    ext = load_inline(name="relu_fallback_ext", cpp_sources=source, functions=["relu_forward"])
except Exception:
    ext = None


class ModelNew(nn.Module):
    def forward(self, x):
        if ext is not None:
            return ext.relu_forward(x)
        return torch.relu(x)
