"""Planted for the compute-sanitizer gate (racecheck): a correct ReLU that stages its input in shared memory
and then reads a neighbour's slot with no __syncthreads() between the write and the read (thread 31 reads
what warp 1 writes). The neighbour's value never reaches the output, so every trial is correct;
racecheck reports the read-after-write hazard."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
__global__ void relu_race_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    volatile __shared__ float tile[256];
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.f;
    float mine = tile[threadIdx.x];
    float neighbour = tile[(threadIdx.x + 1) % 256];  // no barrier: written by another warp, maybe not yet
    if (i < n) {
        out[i] = mine > 0.f ? mine : 0.f;
        if (neighbour == 123456.789f) out[i] = -0.f;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    relu_race_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(name="relu_race_ext", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x.contiguous())
