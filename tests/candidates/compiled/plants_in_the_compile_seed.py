"""Under --compiled: tries to plant a file in the reference workers' compile cache, which it sees (its own
cache is copied from it) and must not be able to write. Wrong on purpose, so it is never compiled."""
import os

import torch
import torch.nn as nn

SEED = os.environ.get("KEVIN_TUI_COMPILE_SEED")
assert SEED and os.path.isdir(SEED), "no compile seed visible under --compiled"
try:
    with open(os.path.join(SEED, "planted.py"), "w") as handle:
        handle.write("print('planted')\n")
except OSError:
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
