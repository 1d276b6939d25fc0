"""Trust3 attack (protocol): an extension name of 300 characters (a valid identifier, so the name check
passed). The host made a build directory named after it: OSError "File name too long" escaped
`Evaluator.evaluate`.

Before: no verdict (the exception ends `kevin-tui eval` and an optimize run). Correct: a
`compile_error` saying the name is not a valid extension name.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor relu_forward(torch::Tensor x) { return x.clamp_min(0); }"
ext = load_inline(name="k" * 300, cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
