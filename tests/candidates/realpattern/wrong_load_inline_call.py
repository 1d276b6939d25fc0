"""Real-world pattern: load_inline called without its sources."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="relu_no_sources", functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
