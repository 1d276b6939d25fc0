"""ATTACK: --strict rejects on static findings only; the runtime evidence that forward dispatched
PyTorch compute (torch_compute_at_runtime: "1 aten::relu") never counts.

(1) The ReLU is computed by PyTorch through `nn.ReLU()(x)` (a module built and called in one
    expression: the static check matches lower-case functional names and calls on `self.` attributes,
    so `torch.nn.ReLU` is not "compute" and the call of a call has no name), and a real C++ extension
    copies the result, so there is a load_inline that ran.
(2) TRUE verdict under --strict: rejected (the kernel's work is PyTorch's; the evaluator itself saw
    aten::relu dispatched).
(3) GOT (this branch, CPU, --strict): correct 0.34x, with only a `torch_compute_at_runtime` warning.
(4) Weakness: host/evaluator.py Evaluator.evaluate: `if self.options.strict and warnings` uses the
    static `warnings` only, not runtime_evidence(); and static_checks._compute_calls is a name list
    (case-sensitive, nn module classes not seen when called inline). Name lists will always have
    holes; the class fix is to let --strict also act on runtime evidence that can only hurt the
    candidate (a compute op dispatched inside forward, counted outside forward's own code path).
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor copy(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i];
    return out;
}
"""

ext = load_inline(name="redteam_strict_copy", cpp_sources=cpp_source, functions=["copy"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.copy(nn.ReLU()(x).contiguous())
