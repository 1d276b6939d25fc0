"""Attack (redteam4), the plain form of `pool_entries_precomputed.py`: the candidate rebinds the problem module's
`get_inputs` (it sits in `sys.modules` as `kevin_reference`), which the candidate worker called to draw its
timing pool, so the candidate chose its own timed inputs. Here it hands the pool zeros and computes an honest
ReLU: with the rebinding effective, the timed outputs differ from the reference's and the verdict is
`incorrect` (the test's witness); a real attack hands the pool its answers (see the other file). After the fix
the worker holds `get_inputs` from before the candidate's import and the rebinding changes nothing."""

import sys

import torch
import torch.nn as nn

problem = sys.modules["kevin_reference"]
drawn = problem.get_inputs


def zeros():
    return [torch.zeros_like(x) for x in drawn()]


problem.get_inputs = zeros


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
