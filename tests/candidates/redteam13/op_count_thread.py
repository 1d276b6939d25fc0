"""Red team 13: the runtime op count is a TorchDispatchMode, which is thread-local: PyTorch arithmetic run on
a thread of the candidate's own (started and joined inside forward, so no thread is left running) is not
seen. The arithmetic sits in a helper, which the static checks do not read as forward's glue.

True verdict under --strict: rejected (PyTorch compute, no kernel of its own).
Got before the fix: correct, no torch_compute_at_runtime.
After: rejected, ops_unseen ("a thread or process was started during the counted call"; unshare and bwrap).
Command: python3 -m kevin_tui eval kevin_tui/kernelbench/level1/19_ReLU.py
  tests/candidates/redteam13/op_count_thread.py --device cpu --json --no-git --no-profile --shapes off
  --sandbox unshare --strict
"""

import threading

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor same(torch::Tensor x) { return x.contiguous(); }
"""

same_ext = load_inline(name="rt13_same", cpp_sources=cpp_source, functions=["same"], extra_cflags=["-O2"])


def relu_elsewhere(y):
    box = []
    worker = threading.Thread(target=lambda: box.append(y * (y > 0)))
    worker.start()
    worker.join()
    return box[0]


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_elsewhere(same_ext.same(x))
