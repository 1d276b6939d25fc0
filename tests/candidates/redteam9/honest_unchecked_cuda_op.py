"""honest_unchecked_cuda_launch.py's kernel called as the operator its library registers
(`torch.ops.rt9_unchecked.relu`, loaded with is_python_module=False): `compiled` without a GPU, never `incorrect`.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_unchecked(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    relu_kernel<<<(int)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;  // no launch check: without a GPU the launch fails silently and y is left unwritten
}
"""
cpp_source = r"""
#include <torch/library.h>
torch::Tensor relu_unchecked(torch::Tensor x);
TORCH_LIBRARY(rt9_unchecked, m) { m.def("relu", &relu_unchecked); }
"""

load_inline(
    name="rt9_unchecked_launch",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_unchecked"],
    is_python_module=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ops.rt9_unchecked.relu(x.contiguous())
