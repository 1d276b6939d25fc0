"""Probe (tests/test_redteam12.py; level1/19_ReLU, untimed): how many page faults four 64 MB tensors, each made and
freed in turn, cost in the candidate's worker once 24 such tensors came and went before them. The answer is this
candidate's `runtime_error` message.

glibc maps every block above 32 MiB afresh and unmaps it when freed, so each tensor is faulted in page by page
(65,536 faults for four) unless the worker set its allocator to keep freed memory (worker/allocator.py): then 0 once
the heap has grown to hold them (a freed block is not always reused at once: posix_memalign asks for a little more
than the block, so the heap grows a few blocks before it settles: six in a fresh process, ten in a worker once seen
in CI, where eight were too few). The reference worker starts the same way."""

import resource

import torch
import torch.nn as nn


def faults_over(cycles: int) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(cycles):
        tensor = torch.empty(16 << 20)
        tensor.fill_(1.0)
        del tensor
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


class ModelNew(nn.Module):
    def forward(self, x):
        faults_over(24)
        raise RuntimeError(f"page faults: {faults_over(4)}")
