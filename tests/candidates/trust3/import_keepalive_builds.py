"""Trust3 attack (protocol): keep the import alive past --timeout with build requests. Each
`load_inline` of an already-built extension is a build request the host answers at once; the host
restarted the phase clock after every build, so sleeping a little less than the timeout between
requests imports for as long as it likes (here about 4 x 2.5 s under --timeout 3).

Before: `correct`. Correct: `timeout` in the load phase (one import deadline, which only the
host's own build time moves back).
"""
import time

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

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

for _ in range(4):
    time.sleep(2.5)
    relu_ext = load_inline(name="relu_ext", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
