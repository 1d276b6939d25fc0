"""Honest (must stay `correct`): a plain C++ ReLU whose forward is marked
@torch.compiler.disable, the usual way to keep torch.compile from tracing into a custom
extension. Applying the decorator imports torch._dynamo, and importing torch._dynamo re-wraps
torch.manual_seed (torch/_dynamo/__init__.py: torch.manual_seed = torch._disable_dynamo(...)).
Nothing here replaces anything on purpose.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

RELU_CPP = r"""
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""
relu_ext = load_inline(name="redteam_relu", cpp_sources=RELU_CPP, functions=["relu_forward"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    @torch.compiler.disable
    def forward(self, x):
        return relu_ext.relu_forward(x)
