"""Probe (tests/test_redteam12.py; level1/19_ReLU, untimed): how many page faults a second 64 MB tensor costs in
the candidate's worker once a first one was freed. The answer is this candidate's `runtime_error` message.

glibc maps every block above 32 MiB afresh and unmaps it when freed, so the second tensor is faulted in page by
page (16,384 faults) unless the worker set its allocator to keep freed memory (worker/allocator.py): then ~0.
The reference worker starts the same way, so the two processes draw and allocate alike."""

import resource

import torch
import torch.nn as nn


def faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class ModelNew(nn.Module):
    def forward(self, x):
        first = torch.empty(16 << 20)
        first.fill_(1.0)
        del first
        before = faults()
        second = torch.empty(16 << 20)
        second.fill_(1.0)
        raise RuntimeError(f"page faults: {faults() - before}")
