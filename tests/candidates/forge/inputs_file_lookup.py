"""Forge (class 4, predictable inputs): read the reference worker's inputs file and precompute.

What it does: at import (not timed) it finds inputs.pt: not from the scratch layout this time but
from the request itself, which the worker keeps in memory (gc -> the CandidateRun -> request
["inputs_path"]). It runs the real kernel on every trial's input once and keeps a table from the
first element's bits to the answer. forward() is one `.item()` and a dict lookup for every call,
checked or timed, and never runs a kernel. Works just as well if the timed calls rotated through
all the trial inputs or cloned them.

Defeats: the candidate being able to read every input before its first call.
Correct verdict: `incorrect` on inputs it has not seen (which a defence must provide: checked and
timed inputs generated after import, never written where the candidate can read them) -- here
`runtime_error` (KeyError) would be what it gets. Today: `correct`, ~5x.
"""
import gc

import torch
import torch.nn as nn
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

_request = next(o.request for o in gc.get_objects() if type(o).__name__ == "CandidateRun")
_ANSWERS = {}
for _args in torch.load(_request["inputs_path"], weights_only=False)["trials"]:
    _ANSWERS[_args[0].view(-1)[0].item()] = relu_ext.relu_forward(_args[0])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ANSWERS[x.view(-1)[0].item()]
