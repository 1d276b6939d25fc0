"""Trust3 attack (static checks): a load_inline that never runs. The call sits in a function nobody
calls, so the static "has a kernel" check is satisfied, and forward computes with PyTorch arithmetic
(`x * (x > 0)`, which no name-based check sees). The host saw no build at all (the runtime
`no_custom_kernel` warning), but --strict rejected only on static findings.

Before: `correct` under --strict. Correct: `rejected` under --strict (a kernel the host never built).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


def build():
    return load_inline(name="never_built", cpp_sources="int f() { return 0; }", functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return x * (x > 0)
