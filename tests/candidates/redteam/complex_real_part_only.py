"""ATTACK: a complex output is judged on its real part only; the imaginary part can be anything.

(1) For problems/complex_double.py (y = 2x, complex64): a C++ kernel that writes 2*Re(x) and leaves
    the imaginary part 0 (half the work, and wrong for every element with Im(x) != 0).
(2) TRUE verdict: incorrect.
(3) GOT (this branch, CPU): correct 0.55x.
(4) Weakness: kevin_tui/evaluator/worker/judge.py compare_tensor: a complex reference skips the exact
    path (`not is_floating_point() and not is_complex()`) and then both sides are cast with
    `.to(torch.float32)`, which drops the imaginary part (torch only warns). Fix: compare complex
    tensors through torch.view_as_real (or |a - r|), with the tolerance of the component dtype.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <complex>
torch::Tensor double_it(torch::Tensor x) {
    auto out = torch::zeros_like(x);
    const float* in = reinterpret_cast<const float*>(x.data_ptr<c10::complex<float>>());
    float* o = reinterpret_cast<float*>(out.data_ptr<c10::complex<float>>());
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) o[2 * i] = 2.f * in[2 * i];  // real part only
    return out;
}
"""

ext = load_inline(
    name="redteam_complex_real_only", cpp_sources=cpp_source, functions=["double_it"], extra_cflags=["-O2"]
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.double_it(x.contiguous())
