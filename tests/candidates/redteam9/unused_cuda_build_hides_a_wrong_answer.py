"""Red team 9 (KernelBench level1/19 ReLU, evaluated with --device cpu on a machine with nvcc): a wrong CPU
answer (zeros) beside a CUDA extension that is built (a real kernel and its launch) and never called. Any
CUDA build on a CPU evaluation ended the run right after loading with `compiled` ("built for real with nvcc;
there is no CUDA device here, so it was not run or checked"), although forward runs on the CPU and could be
judged; `compiled` ranks above `incorrect` (ranking.STATUS_ORDER), so in a best-of-N on a CPU machine this
wrong candidate ranked above every honest-but-wrong one.

TRUE verdict: incorrect (its forward runs here, never calls the build, and returns zeros).
Got: compiled. Fixed (trust10): the checks run; forward never called its nvcc-built code, so `incorrect`.
Its honest twins (same build): honest_unchecked_cuda_launch.py, honest_unchecked_cuda_op.py.
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

ext = load_inline(
    name="rt9_unchecked_launch",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_unchecked"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
