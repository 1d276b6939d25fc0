"""Forge (class 5, timing): pin the *reference* worker to one CPU while it is being timed.

What it does: the reference is timed lazily, in the reference worker, after our outputs are
judged, while our worker sits waiting for its own `time` command. The reference worker is our
sibling, run by the same user, so sched_setaffinity() on its threads is allowed. On our last
checked call (call 2*trials; the trial count is in the inputs file) we pin every thread of the
reference worker to CPU 0; on our first timed call we give it all CPUs back. torch's ReLU there
runs on an OpenMP team of 2 threads, now sharing one core: each call waits a scheduler tick for
the descheduled thread, and the reference's median goes from ~0.016 ms to ~12 ms. Our own kernel
is honest and timed on an idle machine. The reference timing is computed once per Evaluator and
cached, so every later candidate of the same session is compared with the inflated baseline too
(run_all.sh shows the honest relu_torch.py after it). No signal, no thread, nothing left running.

Tried first and dropped: loading both cores with busy threads (changed the reference's median
only sometimes), and SIGSTOP/SIGCONT bursts on the reference worker (slowed its judge 10x but
not the median of 16 us calls, which fit between the stops; and a candidate killed mid-freeze
leaves the reference stopped, so the next candidate waits 600 s for its judgement).

Defeats: reference and candidate timed at different moments, with the candidate alive and able
to act on the reference worker meanwhile (same uid, same CPUs).
Correct verdict: `correct` at the real speed (~0.6x). Today: `correct`, hundreds of x
(`suspicious_speedup` warning only).
"""
import contextlib
import os
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

_CHECKED_CALLS = 2 * len(torch.load(Path.cwd().parent / "reference" / "inputs.pt", weights_only=False)["trials"])
_ALL_CPUS = os.sched_getaffinity(0)


def _reference_worker() -> int | None:
    parent = os.getppid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == parent and b"kevin_tui.evaluator.worker" in cmd and b"reference" in cmd:
                return int(entry)
    return None


def _pin_reference(cpus: set[int]) -> None:
    pid = _reference_worker()
    if pid is None:
        return
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(tid), cpus)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == _CHECKED_CALLS:
            _pin_reference({min(_ALL_CPUS)})
        elif self.calls == _CHECKED_CALLS + 1:
            _pin_reference(_ALL_CPUS)
        return relu_ext.relu_forward(x)
