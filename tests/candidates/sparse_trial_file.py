"""A trial's output file made huge and sparse (tests/problems/small_matmul.py); the timing rounds' twin is
redteam7/sparse_round_file.py.

The outputs are right (PyTorch's own matmul). When the worker closes a trial's output file, the candidate
extends it with `os.truncate` to 256 MB: a hole, which the scratch guard (counting blocks) does not see, but
which the reference worker read whole before judging (the tensor format ignores bytes after the last tensor).

TRUE verdict: the file is not what the protocol allows (unusable: incorrect), and the reference never reads
more than twice its own outputs for the trial. Got before the bound: correct, the reference reading 256 MB per
trial. After: incorrect (more than its outputs take; refused before it is read).
"""

import os
import sys

import torch.nn as nn

files = sys.modules["kevin_tui.evaluator.worker.tensorfile"]
real_open = open


class Handle:
    def __init__(self, path, mode):
        self.path, self.file = str(path), real_open(path, mode)

    def write(self, data):
        return self.file.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()
        if os.path.basename(self.path).startswith("out-"):
            os.truncate(self.path, 256 << 20)
        return False


def opener(path, mode="r", *args, **kwargs):
    return Handle(path, mode) if mode == "wb" and not args and not kwargs else real_open(path, mode, *args, **kwargs)


files.open = opener


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
