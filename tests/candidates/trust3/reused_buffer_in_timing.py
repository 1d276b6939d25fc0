"""Attack (KernelBench level1/19_ReLU): one output buffer for every call, but only once the trials
are over.

The trials check that a call's output stays valid after the next call; this candidate allocates a
fresh output for its first 25 calls (the trials: 7 of them, two or three calls each) and then writes every answer into the same buffer,
saving an allocation per call. Today: `correct` (each timed call's output was copied the moment it
returned, so the reuse never showed). Should be: `incorrect` (a timed call's output is read after the
round, and one served from a buffer that later calls overwrote holds their answer, not its own).
"""
import torch
import torch.nn as nn

TRIAL_CALLS = 25


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.out = None

    def forward(self, x):
        self.calls += 1
        if self.calls <= TRIAL_CALLS:
            return torch.clamp(x, min=0)
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        return torch.clamp(x, min=0, out=self.out)
