"""An honest ReLU (torch.relu, as the reference) for tests/candidates/redteam10/problems/relu_numpy_inputs.py, whose
get_inputs draws with numpy's global generator.

What it shows (redteam10): every timed call's inputs are drawn in each worker from the round's seed, and the
reference judges the candidate's outputs against its own for the same draws; `common.seeded` seeded torch's
generators only, so a problem drawing with numpy (or Python's `random`) got other inputs in each process, and an
honest kernel failed the first timing round.
TRUE verdict: correct (about 1x).
Got before the fix: incorrect, "timing round 1, call 1: N of 65536 values outside tolerance".
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
