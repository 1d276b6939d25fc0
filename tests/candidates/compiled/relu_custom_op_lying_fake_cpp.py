"""A C++ (CPU) ReLU registered as a torch.library custom op whose fake implementation lies about the
output's shape (half the columns): correct eagerly, fails under --compiled."""
import torch
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

relu_ext = load_inline(name="relu_op_ext", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O2"])


@torch.library.custom_op("kevin_candidate::relu", mutates_args=())
def relu(x: torch.Tensor) -> torch.Tensor:
    return relu_ext.relu_forward(x.contiguous())


@relu.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[:-1] + (x.shape[-1] // 2,))  # lies: half the columns


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
