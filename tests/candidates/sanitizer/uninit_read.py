"""Planted for the compute-sanitizer gate (initcheck): a correct ReLU that also reads a scratch buffer it
allocated with torch::empty and never wrote. The value never reaches the output, so every trial is
correct; initcheck, with PyTorch's caching allocator off (a fresh cudaMalloc), reports the read."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
__global__ void relu_uninit_kernel(const float* __restrict__ x, const float* __restrict__ scratch,
                                   float* __restrict__ out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float never_written = scratch[i];
        float v = x[i];
        out[i] = v > 0.f ? v : 0.f;
        if (never_written == 123456.789f) out[i] = -0.f;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    auto scratch = torch::empty_like(x);
    const int64_t n = x.numel();
    relu_uninit_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), scratch.data_ptr<float>(),
                                                 out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(name="relu_uninit_ext", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x.contiguous())
