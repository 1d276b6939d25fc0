"""Red team 7: a reused binding object whose contents came from a file its key does not cover (CUDA;
level1/19 ReLU; evaluate this file, then binding_reads_cuda_source_second.py).

The host reuses load_inline's `main.o` for a later build with the same key (name, cpp_sources, functions,
C++ flags, header, toolchain), refusing include flags (-I, -i..., --include, @) and any inclusion in
cpp_sources but `#include <header>`. The C++ flag `-Wp,-imacros,cuda.cu` passes that check (it starts
with `-Wp`), and tells the preprocessor to read the build's own `cuda.cu` — the CUDA source, which is NOT
in the key — for its macros while compiling main.cpp. Here cuda.cu defines `RT7_SCALE 1.0f`: main.o's
`rt7_scale()` returns 1 and the kernel computes ReLU. The second file differs only in cuda.cu
(`RT7_SCALE 2.0f`): built alone its main.o returns 2 and the output is 2*ReLU (`incorrect`); built after
this one it links this build's main.o (binding `reused`) and is `correct`.

TRUE verdict of the second file: incorrect (what its own source builds). Got: correct when it follows
this one (GPU only: on a CPU machine both stop at `compiled`; the reuse shows as `binding: reused` in
its build record). Hole: host/bindings.py `reusable` checks flag prefixes, and `-Wp,`/`-Xpreprocessor`
pass options straight to the preprocessor. After: a main.cpp compiled with any flag outside an allow-list of
flags whose effect is their own text is never reused (the second build compiles its own: incorrect).
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SCALE = "1.0f"

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
