"""Honest (redteam5): a C++ ReLU that uses torch's allocation and bookkeeping helpers (empty_like,
contiguous, numel, sizes, at::parallel_for, AT_DISPATCH, TORCH_CHECK) but computes every value itself.
Must stay `correct` under --strict: none of those is PyTorch compute."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <ATen/Parallel.h>

torch::Tensor relu_forward(torch::Tensor input) {
    TORCH_CHECK(input.dim() >= 1 && input.size(0) > 0, "an empty input");
    auto x = input.contiguous();
    auto out = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu_forward", [&] {
        const scalar_t* in = x.data_ptr<scalar_t>();
        scalar_t* o = out.data_ptr<scalar_t>();
        at::parallel_for(0, x.numel(), 4096, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) o[i] = in[i] > scalar_t(0) ? in[i] : scalar_t(0);
        });
    });
    return out.view(x.sizes());
}
"""

ext = load_inline(name="rt5_honest_helpers", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
