"""A C++ kernel for the first half of the rows and PyTorch for the rest: custom-kernel coverage about half."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""
ext = load_inline(name="relu_half_ext", cpp_sources=source, functions=["relu_forward"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        half = x.shape[0] // 2
        return torch.cat([ext.relu_forward(x[:half].contiguous()), torch.relu(x[half:]).exp().log()])
