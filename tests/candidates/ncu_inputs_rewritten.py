"""A correct torch ReLU that, in every call, replaces the `in-0.kt` in its scratch (the first trial's inputs) with
one 1x1 tensor, and notes the shape it was called with. The Nsight Compute pass used to profile it on the file left
in its scratch, so a candidate chose what its kernels were profiled on (a small input flatters occupancy and
stalls). The pass now runs on inputs the host reads from the reference worker (tests/test_ncu.py)."""

from pathlib import Path

import torch
import torch.nn as nn

from kevin_tui.evaluator.worker import tensorfile


class ModelNew(nn.Module):
    def forward(self, x):
        with open("shapes-seen.txt", "a") as seen:
            seen.write(f"{tuple(x.shape)}\n")
        if Path("in-0.kt").exists():
            tensorfile.write(Path("in-0.kt"), [torch.zeros(1, 1)])
        return torch.relu(x)
