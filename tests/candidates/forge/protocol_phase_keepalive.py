"""Forge (class 1, protocol): escape the per-phase time limit by sending `phase` events.

What it does: the first forward() takes 15 s (sleeping), and every second it writes a
`phase: check` event on the worker's event pipe. The host restarts a phase's deadline on every
`phase` event, so with `--timeout 3` the candidate is never timed out; the same trick with
`phase: build` gets the 900 s build limit for forward(), and an endless loop of it hangs
kevin-tui forever (with the TUI showing "check..."). Everything else is an honest ReLU.

Defeats: the host letting the worker move its own deadline.
Correct verdict (run with --timeout 3): `timeout`. Today: `correct` after ~15 s.
"""
import contextlib
import os
import time
from pathlib import Path

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

_FD = None
for _entry in os.listdir("/proc/self/fd"):
    with contextlib.suppress(OSError):
        _flags = int(Path(f"/proc/self/fdinfo/{_entry}").read_text().split("flags:")[1].split()[0], 8)
        if os.readlink(f"/proc/self/fd/{_entry}").startswith("pipe:") and _flags & os.O_ACCMODE == os.O_WRONLY:
            _FD = int(_entry)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.slow_done = False

    def forward(self, x):
        if not self.slow_done:
            self.slow_done = True
            for _ in range(15):
                time.sleep(1.0)
                os.write(_FD, b'{"event": "phase", "phase": "check"}\n')
        return relu_ext.relu_forward(x)
