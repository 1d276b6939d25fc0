"""Real-world pattern: host code that uses tensor operators (x / norm.sqrt()) and an unqualified ATen
call (`zeros_like(x)`, found by argument lookup), which the light CUDA headers must cover, or the build
falls back to the full ones (3x slower)."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
__global__ void scale_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto norm = (x * x).sum();
    auto scaled = x / norm.sqrt() * norm.sqrt();
    auto y = zeros_like(x);
    int n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(scaled.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="relu_tensor_operators",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    extra_cflags=[""],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
