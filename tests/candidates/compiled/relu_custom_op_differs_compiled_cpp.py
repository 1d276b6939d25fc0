"""The C++ custom-op ReLU, which computes something else when it is being compiled (the ReLU of all but the
first row): correct eagerly, wrong under --compiled. The host compares the compiled output."""
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
    return torch.empty_like(x)


class ModelNew(nn.Module):
    def forward(self, x):
        if torch.compiler.is_compiling():
            return relu(x[1:])
        return relu(x)
