"""The test's form of many_builds_reset_the_build_limit.py: the same build requests, but of tests/candidates/
relu_cpp.py's extension (in the test build cache), so that the suite needs no cold builds; the test makes each
build take its host a few seconds. Honest otherwise (`correct` when its builds fit the limit)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BUILDS = 4

cpp_source = """
torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        o[i] = in[i] > 0.f ? in[i] : 0.f;
    }
    return out;
}
"""

for index in range(BUILDS):
    relu_ext = load_inline(
        name="relu_ext",
        cpp_sources=cpp_source,
        functions=["relu_forward"],
        extra_cflags=["-O2"],
    )


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
