"""A CUDA candidate with a compile error on line 11 of this file (an undefined identifier)."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_cuda_source = """
__global__ void relu_kernel(const float* x, float* out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[i] = v > 0.f ? v : 0.f;
        out[i] += undefined_bias;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

relu_ext = load_inline(
    name="relu_cuda_ext",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=relu_cuda_source,
    functions=["relu_forward"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
