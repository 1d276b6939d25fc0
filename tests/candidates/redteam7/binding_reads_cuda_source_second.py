"""Red team 7: the second of binding_reads_cuda_source_first.py (see there): the same cpp_sources and
flags, only cuda.cu differs (`RT7_SCALE 2.0f`). TRUE verdict: incorrect (its own main.o returns 2, the
output is 2*ReLU). Got after the first file (GPU only): correct, its build linking the first build's main.o.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SCALE = "2.0f"

cpp_source = r"""
#ifndef RT7_SCALE
#define RT7_SCALE 3.0f
#endif
float rt7_scale() { return RT7_SCALE; }
torch::Tensor relu_forward(torch::Tensor x);
"""

cuda_source = (
    f"#define RT7_SCALE {SCALE}\n"
    + r"""
float rt7_scale();

__global__ void relu_kernel(const float* x, float* y, float s, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? s * x[i] : 0.f;
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), rt7_scale(), n);
    return y;
}
"""
)

ext = load_inline(
    name="rt7_binding_imacros",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    extra_cflags=["-Wp,-imacros,cuda.cu"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x.contiguous())
