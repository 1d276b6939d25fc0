"""Probe (tests/test_redteam12.py): a problem whose `get_init_inputs` reports, as the reason it cannot run, how many
page faults four 64 MB tensors (made and freed in turn, after 24 others) cost in the reference worker: 65,536 with
glibc's defaults, 0 with worker/allocator.py's settings, as in the candidate's (redteam12/probe_page_faults.py)."""

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


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    faults_over(24)
    raise RuntimeError(f"page faults: {faults_over(4)}")
