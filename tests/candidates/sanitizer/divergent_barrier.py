"""Planted for the compute-sanitizer gate (synccheck): a correct ReLU whose even lanes alone reach a
__syncthreads() (a barrier in divergent code, undefined since Volta's independent thread scheduling).
The barrier guards nothing the output needs, so every trial is correct; synccheck reports the barrier
error."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
__global__ void relu_barrier_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    if (threadIdx.x % 2 == 0) {
        __syncthreads();  // only half of each warp arrives here
    }
    if (i < n) out[i] = v > 0.f ? v : 0.f;
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    relu_barrier_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(name="relu_barrier_ext", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x.contiguous())
