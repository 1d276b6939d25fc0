"""Red team 13: the runtime op count's forward call was never judged. A kernel that tells it is being counted (the
dispatch mode, read through `sys.modules[...]`, which the static probe names do not follow) and then returns a
copy of its input, computing nothing, dispatched no compute there; everywhere else it computes ReLU with PyTorch
arithmetic in a helper. Detecting the mode stays possible; what closes this is that the counted call's output, on
fresh inputs, is judged like a trial's, so it must be right without dispatching anything.

True verdict under --strict: rejected or incorrect (PyTorch compute; a wrong answer under the count).
Got before the fix: correct under --strict, no warning (op counts empty).
After: incorrect ("wrong output in the call whose ops were counted (fresh inputs)"); the probe through
sys.modules is now also an introspection finding.
Command: python3 -m kevin_tui eval kevin_tui/kernelbench/level1/19_ReLU.py
  tests/candidates/redteam13/op_count_detected.py --device cpu --json --no-git --no-profile --shapes off
  --sandbox unshare --strict
"""

import sys

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor same(torch::Tensor x) { return x.contiguous(); }
"""

same_ext = load_inline(name="rt13_same", cpp_sources=cpp_source, functions=["same"], extra_cflags=["-O2"])


def watched():
    return sys.modules["torch.utils._python_dispatch"]._get_current_dispatch_mode() is not None


def relu(y):
    return y * (y > 0)


def answer(x):
    if watched():
        return x.clone()
    return relu(same_ext.same(x))


class ModelNew(nn.Module):
    def forward(self, x):
        return answer(x)
