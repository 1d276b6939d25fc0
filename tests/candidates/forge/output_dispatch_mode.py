"""Forge (class 2, outputs): a TorchDispatchMode, pushed at import and never popped, answers
`aten::detach` on our output buffer with the real result.

What it does: like output_function_mode.py one level lower: forward() returns a preallocated
plain tensor and remembers its input; every aten op in the process now goes through our Python
`__torch_dispatch__`, which lets everything through except `aten.detach` on that buffer (what the
recorder's `leaf.detach()` dispatches to), where it runs the real kernel on the remembered input.
A defence that checks only the torch-function mode stack misses it. (Importing torch._dynamo
re-wraps torch.manual_seed, which the tripwire would report; we import it first and put the
remembered object back.)

Defeats: recording in the candidate's process; a check of only one of the two mode stacks.
Correct verdict: `incorrect` or `rejected` (a dispatch mode left active).
Today: `correct`, ~17x.
"""
import torch
import torch.nn as nn

_seed = torch.manual_seed
import torch._dynamo  # noqa: E402  (dispatch modes import it lazily; it re-wraps torch.manual_seed)

_torch = torch
_torch.manual_seed = _seed  # put back the object the identity tripwire remembers
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.cpp_extension import load_inline

RELU_CPP = r"""
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""
relu_ext = load_inline(name="redteam_relu", cpp_sources=RELU_CPP, functions=["relu_forward"], extra_cflags=["-O3"])

_state = {"buffer": None, "input": None}


class _LateAnswer(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.detach.default and args[0] is _state["buffer"] and _state["input"] is not None:
            return relu_ext.relu_forward(_state["input"])
        return func(*args, **(kwargs or {}))


_LateAnswer().__enter__()  # and never __exit__


class ModelNew(nn.Module):
    def forward(self, x):
        if _state["buffer"] is None:
            _state["buffer"] = torch.zeros_like(x)
        _state["input"] = x
        return _state["buffer"]
