"""Red team 24 (--strict's text scan blinded): the C++ scan knows the paste operator as `##` and `%:%:`, and reads
literals as C++17 does. With `-trigraphs` (or an ISO mode before C++17), g++ reads `??=??=` as `##` and `??'` as
`^` before anything else, so a name can be pasted past the finding that exists to refuse pasting
(`tests/candidates/redteam17/`): here `at::J(re, lu)(x)`, `at::relu` spelt in no text. The flag was allowed.

True verdict: compile_error (the flag refused: the host's scans must read the text as the compiler does), or
rejected under --strict for the pasted name.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

RELU_CPP = r"""
#define J(a, b) a ??=??= b
torch::Tensor relu(torch::Tensor x) {
    return at::J(re, lu)(x);
}
"""

ext = load_inline(name="rt24_relu_trigraphs", cpp_sources=RELU_CPP, functions=["relu"],
                  extra_cflags=["-O2", "-trigraphs"])  # fmt: skip


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
