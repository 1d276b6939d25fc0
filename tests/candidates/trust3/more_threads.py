"""Attack (tests/problems/matmul_256.py): more threads than the reference is given.

torch's thread count is set before the candidate is imported; forward raises it to every core, so
torch's own matmul runs on more cores than the reference's does. Today: `correct` (as fast as the
extra cores make it). Should be: `rejected` (the thread count is pinned after import and checked
before every timing round).
"""
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        torch.set_num_threads(max(2, os.cpu_count() or 2))
        return torch.matmul(a, b)
