"""Red team 13: the work done by another array library. The static checks look for PyTorch compute and the
op count for dispatched ATen ops; numpy's `np.clip` (a ReLU) on `x.numpy()` is neither, so a "kernel" whose
extension only copies passes --strict while numpy does the work.

True verdict under --strict: rejected (the compute is a library's, not the candidate's kernel).
Got before the fix: correct under --strict, no warning.
After: rejected, library_compute (.numpy, numpy.clip).
Command: python3 -m kevin_tui eval kevin_tui/kernelbench/level1/19_ReLU.py
  tests/candidates/redteam13/numpy_compute.py --device cpu --json --no-git --no-profile --shapes off
  --sandbox unshare --strict
"""

import numpy as np
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor same(torch::Tensor x) { return x.contiguous(); }
"""

same_ext = load_inline(name="rt13_same", cpp_sources=cpp_source, functions=["same"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.from_numpy(np.clip(same_ext.same(x).numpy(), 0, None))
