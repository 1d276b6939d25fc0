"""Red team 13: PyTorch arithmetic sent to a thread pool (its thread started by the first call and kept, idle,
between calls: not "left running" by the tripwire's measure), where the op count's dispatch mode, which sees
only the thread it is entered on, does not look.

True verdict under --strict: rejected (PyTorch compute, no kernel of its own).
Got before the fix: correct under --strict (as op_count_thread.py; not run end to end, the unit test covers it).
After: rejected, ops_unseen ("1 Python thread(s) of the candidate's alive").
Command: python3 -m kevin_tui eval kevin_tui/kernelbench/level1/19_ReLU.py
  tests/candidates/redteam13/op_count_pool.py --device cpu --json --no-git --no-profile --shapes off
  --sandbox unshare --strict
"""

from concurrent.futures import ThreadPoolExecutor

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor same(torch::Tensor x) { return x.contiguous(); }
"""

same_ext = load_inline(name="rt13_same", cpp_sources=cpp_source, functions=["same"], extra_cflags=["-O2"])
pool = ThreadPoolExecutor(1)


def relu(y):
    return y * (y > 0)


class ModelNew(nn.Module):
    def forward(self, x):
        return pool.submit(relu, same_ext.same(x)).result()
