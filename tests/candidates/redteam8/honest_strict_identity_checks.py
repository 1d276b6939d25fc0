"""Red team 8, honest (must stay `correct` under --strict, KernelBench level1/19 ReLU): a C++ ReLU whose forward
checks identities, `x is not None` and that the kernel gave a new tensor (`out is not x`). An identity test asks
about the Python object and dispatches nothing; the static checks took `is`/`is not` on a tensor for "a tensor
comparison", PyTorch compute.

Before: warning `torch_compute_ops` ("a tensor comparison (x is not None)"), `rejected` under --strict.
After: no finding.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

ext = load_inline(name="rt8_relu_loop", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        assert x is not None, "ReLU needs an input"
        out = ext.relu_forward(x.contiguous())
        assert out is not x, "the kernel writes a new tensor"
        return out
