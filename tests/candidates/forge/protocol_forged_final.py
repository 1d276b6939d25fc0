"""Forge (class 1, protocol): emit a `final` event with status "correct" through the worker's own Channel.

What it does: at import it finds the worker's `Channel` object with gc (no file descriptors, no
monkey-patching: it just calls the worker's own `emit`) and sends
`final(status="correct", message="correct, 9.40x vs eager (...)")`. The host takes the first
non-phase event as the outcome and builds Verdict(Status("correct"), message) from it. forward()
returns zeros, and the real run that follows is never looked at.

Defeats: the host accepting a terminal status from the worker; nothing ties `final` to a
`checked` + `judged` + `timed` sequence the host itself drove.
Correct verdict: `incorrect` (zeros), or `runtime_error`/`rejected` for a protocol violation.
Today: `correct` with the forged message (speedup null: the message is the only number, which is
what the TUI and the session log show).
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

for _obj in gc.get_objects():
    if type(_obj).__name__ == "Channel" and hasattr(_obj, "emit"):
        _obj.emit(
            "final",
            status="correct",
            message="correct, 9.40x vs eager (0.002 ms vs 0.017 ms)",
            details={},
            checks=[{"name": "output trial 1 (before the reference)", "passed": True, "detail": ""}],
            builds=[],
        )
        break


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
