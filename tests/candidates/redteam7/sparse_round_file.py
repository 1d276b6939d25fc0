"""Red team 7: a timing round's output file made huge and sparse (tests/problems/small_matmul.py).

The outputs are right (PyTorch's own matmul). When the worker closes a round's file, the candidate extends it
with `os.truncate` to 256 MB: a hole, no disk blocks, so the scratch guard (which counts blocks) sees
nothing, but the reference worker reads the whole file into memory before judging, and the tensor format
ignores bytes after the last tensor. The size is the candidate's choice, up to the reference's memory limit
(half the machine's RAM): every round costs the reference that much memory and time.

TRUE verdict: the round file is not what the protocol allows (unusable: incorrect), and the reference never
reads more than its calls' outputs can take. Got before the fix: correct, the reference reading 256 MB per
round. After: incorrect (the file is more than its calls' outputs take; refused before it is read).
Hole: worker/reference.py ingest read a candidate's file of any size.
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
        if os.path.basename(self.path).startswith("round-"):
            os.truncate(self.path, 256 << 20)
        return False


def opener(path, mode="r", *args, **kwargs):
    return Handle(path, mode) if mode == "wb" and not args and not kwargs else real_open(path, mode, *args, **kwargs)


files.open = opener


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
