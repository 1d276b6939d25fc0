"""Real-world pattern: a flag for a GPU architecture this nvcc (13.x) no longer supports."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="relu_sm70",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    extra_cuda_cflags=["-gencode", "arch=compute_70,code=sm_70"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
