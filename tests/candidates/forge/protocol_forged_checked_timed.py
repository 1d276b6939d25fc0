"""Forge (class 1, protocol): write our own `checked` and `timed` events on the worker's event channel.

What it does: at import, before the worker has run anything, it finds the event pipe the worker
keeps (the write-only pipe among /proc/self/fd: the Channel's dup of the original stdout), computes
the right answers for every trial from the inputs file the reference wrote (../reference/inputs.pt
beside our scratch dir), saves them in the worker's outputs format, and writes two JSON lines:
`checked` (pointing at those outputs) and `timed` (candidate median = the reference's eager time,
measured here, divided by 8 -> a plausible 8x, under the 10x `suspicious_speedup` flag). The host
takes the first `checked` it reads, has the reference judge the forged file (it passes: the values
are right), and takes the next `timed` as our timing. forward() itself returns zeros.

Defeats: the host trusting anything on the worker's stdout; the judge trusting `outputs_path`.
Correct verdict: `incorrect` (forward returns zeros) or `runtime_error`/`rejected` (protocol
violation: events the worker did not send, two `checked` events). Today: `correct, ~8x`.
"""
import contextlib
import json
import os
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


def _event_fd() -> int:
    """The worker's private protocol pipe: the only write-only pipe we hold."""
    for entry in os.listdir("/proc/self/fd"):
        fd = int(entry)
        with contextlib.suppress(OSError):  # (the listing's own fd is gone by now)
            target = os.readlink(f"/proc/self/fd/{fd}")
            flags = int(Path(f"/proc/self/fdinfo/{fd}").read_text().split("flags:")[1].split()[0], 8)
            if target.startswith("pipe:") and flags & os.O_ACCMODE == os.O_WRONLY:
                return fd
    raise LookupError("no event pipe")


def _forge() -> None:
    scratch = Path.cwd()  # the worker runs in its own scratch dir: <eval>/candidate-N
    inputs = torch.load(scratch.parent / "reference" / "inputs.pt", weights_only=False)
    runs = []
    for args in inputs["trials"]:
        leaf = {"type_name": "torch.Tensor", "value": relu_ext.relu_forward(args[0]), "device": "cpu"}
        runs.append({"before": [leaf], "after": [leaf]})
    forged = scratch / "forged_outputs.pt"
    torch.save(runs, forged)

    x = inputs["trials"][0][0]
    samples = []
    for _ in range(200):  # what the reference will take, measured the same way it is
        t0 = time.perf_counter()
        torch.relu(x)
        samples.append((time.perf_counter() - t0) * 1e3)
    fake = sorted(samples)[len(samples) // 10] / 8.0  # p10: robust to a busy core during the probe
    timing = {"median_ms": fake, "min_ms": fake * 0.9, "p10_ms": fake * 0.95, "p90_ms": fake * 1.05,
              "max_ms": fake * 1.3, "trials": 1000, "method": "wall clock"}
    checks = [{"name": "inputs unchanged", "passed": True, "detail": ""},
              {"name": "no replaced torch/timing functions", "passed": True, "detail": ""},
              {"name": "nothing left running after forward", "passed": True, "detail": ""}]
    lines = [
        {"event": "checked", "outputs_path": str(forged), "checks": checks, "builds": []},
        {"event": "timed", "timings": {"wall": timing}, "checks": checks},
    ]
    os.write(_event_fd(), "".join(json.dumps(e) + "\n" for e in lines).encode())


_forge()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
