"""Attack (tests/problems/matmul_256.py): per-call times moved into the control.

An honest matmul, but `Timer._call` is wrapped: 90% of each timed call's reported time is taken off
its sample and added to the control call that follows (the reference model timed in this process).
The sum the host's clock check compared stays the same; the samples the speedup came from are 10x too
short. Today: `correct` at ~10x (true speed ~1x). Should be: `correct` at its real speed, or `rejected`
(the host's clock, which decides the speedup, saw calls as long as the reference's).
"""
import torch
import torch.nn as nn

from kevin_tui.evaluator.worker import timing_loop

_original = timing_loop.Timer._call


def _call(self, fn, args, samples, synced):
    out = _original(self, fn, args, samples, synced)
    control = getattr(self, "control_ms", None)
    if fn is self.fn and samples is not control:
        owed = samples[-1] * 0.9
        samples[-1] -= owed
        self.owed = owed
    elif control is not None and samples is control:
        samples[-1] += getattr(self, "owed", 0.0)
        self.owed = 0.0
    return out


timing_loop.Timer._call = _call


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)
