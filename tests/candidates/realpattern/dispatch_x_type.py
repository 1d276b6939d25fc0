"""Real-world pattern (a sixth of QwQ's kernels): AT_DISPATCH_*(x.type(), ...), removed from torch."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.type(), "relu_forward", ([&] {
        const scalar_t* in = x.data_ptr<scalar_t>();
        scalar_t* o = out.data_ptr<scalar_t>();
        for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0 ? in[i] : 0;
    }));
    return out;
}
"""

ext = load_inline(name="relu_dispatch_type", cpp_sources=source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
