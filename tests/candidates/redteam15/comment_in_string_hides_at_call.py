"""A ReLU for level1/19 whose C++ calls `at::relu` between two string literals that look like a comment's ends.

Attack: the host's C++ text scan (`static_checks.cpp_torch_compute`) first drops comments with `strip_c_comments`,
which knows no string literals: `"/*"` ... `"*/"` makes the code between them a comment to the scan, so `at::relu`
is no `torch_compute_in_extension` finding.
True verdict: rejected under --strict (PyTorch compute in the extension). Verdict got (2026-12-02): rejected under
--strict, torch_compute_in_extension "at::_ops::relu" (from the library's imported symbols, not the text) and
torch_compute_at_runtime "1 aten::relu". HELD; the module's own static checks reported nothing (the text scan alone
missed it: defence in depth only). Since the lead's fix (host/cpp_text.py: comments are found outside string,
character and raw literals, as the compiler finds them) the text scan sees `at::relu` too.
Command:
  python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam15/comment_in_string_hides_at_call.py \
      --device cpu --json --no-git --no-profile --shapes off --sandbox unshare --strict --no-timing
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
static const char* kOpen = "/*";
torch::Tensor relu_forward(torch::Tensor x) {
    return at::relu(x);
}
static const char* kClose = "*/";
"""

relu_ext = load_inline(name="relu_string_comment", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x)
