"""A problem whose exact output is constant (each row's softmax sums to 1): the float32 reference's own
rounding makes it vary around 1 by ~1e-7 (tests/candidates/redteam9/honest_exact_constant.py)."""

import torch
import torch.nn as nn

batch_size = 256
features = 4096


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1).sum(dim=1)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
