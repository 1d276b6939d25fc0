"""Forge (class 1, protocol): an honest kernel that reports its own timing.

What it does: the kernel is a real, correct C++ ReLU, and every checked call is honest. It counts
its calls (the trial count is in the inputs file beside our scratch dir, so it knows that call
2*trials+1 is the first timed one); on that call it writes a `timed` event with a median of the
reference's time / 8 on the worker's event pipe (found by walking gc for the worker's Channel and
writing to its file object directly, not through emit()), then carries on honestly. The host takes
the first `timed` it sees after sending `time`, and kills the worker.

Defeats: timings measured and reported by the process that is being timed.
Correct verdict: `correct` at the kernel's real speed (about 0.6x here); or `runtime_error` for
the protocol violation. Today: `correct, ~8x`.
"""
import gc
import json
import time
from pathlib import Path

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

_TRIALS = len(torch.load(Path.cwd().parent / "reference" / "inputs.pt", weights_only=False)["trials"])
_OUT = next(o.out for o in gc.get_objects() if type(o).__name__ == "Channel" and hasattr(o, "out"))


def _report_fast_timing(x: torch.Tensor) -> None:
    samples = []
    for _ in range(200):
        t0 = time.perf_counter()
        torch.relu(x)
        samples.append((time.perf_counter() - t0) * 1e3)
    fake = sorted(samples)[len(samples) // 10] / 8.0  # p10: robust to a busy core during the probe
    timing = {"median_ms": fake, "min_ms": fake * 0.9, "p10_ms": fake * 0.95, "p90_ms": fake * 1.05,
              "max_ms": fake * 1.4, "trials": 1000, "method": "wall clock"}
    _OUT.write(json.dumps({"event": "timed", "timings": {"wall": timing}, "checks": []}) + "\n")
    _OUT.flush()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 2 * _TRIALS + 1:  # warm-up call 1 of the timing loop
            _report_fast_timing(x)
        return relu_ext.relu_forward(x)
