"""Red team 31: a ReLU several times slower than the reference's (it computes it eight times) that makes only its
warm-up slower still, so that the host plans three calls a round; nothing else about its loop differs. Over three
calls the round's tripwires are a large share of each call, and the host cannot tell a kernel's time from them
below their time per call (host/timing.py tripwire_floor): both sides read as that floor, "no measurable
difference", where the kernel is several times slower. The round's code is replaced in place (`__code__`) for the
warm-up's sleep only."""

# ruff: noqa: F821  (_round runs as Timer.round's code, with worker/timing_loop.py's globals: time, tensorfile...)

import sys

import torch
import torch.nn as nn


def _round(self, calls, seed, path, control=False, watch=True):
    fn = self.control if control else self.fn
    seen = self.__dict__.get("_seen", 0)
    self._seen = seen + 1
    if seen == 0:  # the warm-up: slow, so the host plans three calls a round

        def fn(args, inner=fn):
            time.sleep(0.012)
            return inner(args)

    samples = []
    outputs = []
    self.outputs, self.shared_memory = [], 0
    tripwires = 0.0
    with torch.no_grad():
        for index in range(calls):
            args = self.inputs.args(seed, index)
            out = self._call(fn, args, samples, [])
            checked = time.perf_counter()
            with no_modes():
                self.shared_memory += bool(aliases(out, args, []))
            tripwires += time.perf_counter() - checked
            outputs.append(out)
            del args, out
        with no_modes():
            tensorfile.write(path, outputs)
    if not control:
        self.outputs = outputs
    checked = time.perf_counter()
    self.found = self.watch.check() if watch else ([], [])
    self.tripwires_ms = (tripwires + time.perf_counter() - checked) * 1e3
    return samples, None


_loop = sys.modules.get("kevin_tui.evaluator.worker.timing_loop")
if _loop is not None:
    _loop.Timer.round.__code__ = _round.__code__


class ModelNew(nn.Module):
    def forward(self, x):
        for _ in range(7):
            x = torch.relu(x) + 0.0
        return torch.relu(x)
