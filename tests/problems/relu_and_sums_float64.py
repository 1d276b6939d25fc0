"""A float64 problem: ReLU and row sums of float64 values, judged at float64's tolerance (1e-7), with the float64
reference as the precision evidence's truth (tests/candidates/redteam21/float64_problem_in_float32.py, and
honest_float64_reordered.py: the sums in another order)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x), x.sum(-1)


def get_inputs():
    return [torch.randn(64, 4096, dtype=torch.float64)]


def get_init_inputs():
    return []
