"""Planted for the compute-sanitizer gate (memcheck): a correct ReLU whose last thread also reads one float
past the end of a one-float tensor it allocated. The value never reaches the output, so every trial is
correct, and the read stays inside the allocator's rounding (512 bytes) in an ordinary run; memcheck, with
PyTorch's caching allocator off (a 4-byte cudaMalloc of its own), reports it out of bounds."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
__global__ void relu_oob_kernel(const float* __restrict__ x, const float* __restrict__ one,
                                float* __restrict__ out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float past_the_end = (i == n - 1) ? one[1] : 0.f;
        float v = x[i];
        out[i] = v > 0.f ? v : 0.f;
        if (past_the_end == 123456.789f) out[i] = -0.f;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    auto one = torch::zeros({1}, x.options());
    const int64_t n = x.numel();
    relu_oob_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), one.data_ptr<float>(), out.data_ptr<float>(),
                                              n);
    return out;
}
"""

ext = load_inline(name="relu_oob_ext", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x.contiguous())
