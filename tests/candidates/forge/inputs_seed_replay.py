"""Forge (class 4, predictable inputs): regenerate the inputs from the fixed seed, no file access.

What it does: the evaluator seeds trial t's get_inputs() with seed + 1 + t, and the seed is 42
unless --seed is given (and it is in our request in any case). At import we re-run the problem's
own get_inputs() (the worker already imported the problem as `kevin_reference`) under seeds 43..74,
precompute the answers with the real kernel, and restore the RNG. forward() is a lookup keyed on
the first element, for checked and timed calls alike.

Defeats: deterministic, guessable trial inputs (and a seed the candidate can read).
Correct verdict: `incorrect`/`runtime_error` on unseen inputs (per-evaluation random seed the
candidate never sees, distinct from the construction seed). Today: `correct`, ~5x.
"""
import sys

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

_problem = sys.modules["kevin_reference"]
_rng = torch.get_rng_state()
_ANSWERS = {}
for _seed in range(43, 43 + 32):
    torch.manual_seed(_seed)
    _x = _problem.get_inputs()[0]
    _ANSWERS[_x.view(-1)[0].item()] = relu_ext.relu_forward(_x)
torch.set_rng_state(_rng)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ANSWERS[x.view(-1)[0].item()]
