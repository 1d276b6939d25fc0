"""ReLU whose get_inputs draws with numpy's global generator (as many hand-written problems do)."""

import numpy as np
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch, dim = 64, 1024


def get_inputs():
    return [torch.from_numpy(np.random.standard_normal((batch, dim)).astype(np.float32))]


def get_init_inputs():
    return []
