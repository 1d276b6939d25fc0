"""Red team 31: an identical ReLU (torch.relu itself) that makes its warm-up slow, so that the host plans three calls
a round, then skips the loop's tripwires in its main rounds (the aliases check after each call, ~12 us here, and the
round's RoundWatch) and reports every call as taking no time; its control rounds run them, a little slowly, so they
widen nothing at the low end. The host subtracts the reference's loop overhead per call, tripwires included, which
is more than the 13 us ReLU: what was left of the candidate's rounds was below zero, and the floor its own report.
Before the fix: `correct`, 13,885,833x vs eager (95% interval 13,332,999-27,059,740x).

The round's code is replaced in place (`__code__`), so the identity tripwires see the same function object."""

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
    with torch.no_grad():
        for index in range(calls):
            args = self.inputs.args(seed, index)
            start = time.perf_counter()
            out = fn(args)
            took = (time.perf_counter() - start) * 1e3
            samples.append(took if control or seen == 0 else 0.0)
            outputs.append(out)
            del args, out
        tensorfile.write(path, outputs)
    if not control:
        self.outputs = outputs
    if control:  # a little slower than the reference's own rounds: no gain for the control to widen the interval by
        time.sleep(0.001)
    self.found = self.watch.check() if control and watch else ([], [])
    return samples, None


_loop = sys.modules.get("kevin_tui.evaluator.worker.timing_loop")
if _loop is not None:
    _loop.Timer.round.__code__ = _round.__code__


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
