"""Crash (GPU): a kernel that writes through a null pointer."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
__global__ void bad_kernel(float* out) { out[threadIdx.x] = 1.f; }

torch::Tensor bad(torch::Tensor x) {
    bad_kernel<<<1, 32>>>(nullptr);
    return x;
}
"""

ext = load_inline(name="bad_ext", cpp_sources="torch::Tensor bad(torch::Tensor x);", cuda_sources=source,
                  functions=["bad"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.bad(x)
