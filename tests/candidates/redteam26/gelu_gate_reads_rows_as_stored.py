"""Red team 26 (layouts the installed kernel is given): tinylm's GeluGate reading x's memory as a contiguous
[rows, dim] array, as a C++ kernel indexing `x.data_ptr<float>()` does. Every input eval and `apply --check`
(on the block alone) give it is contiguous, as the problem's get_inputs() makes it: `correct`, check passed. In a
model that calls the block on a view (a sequence-first model's `h.transpose(0, 1)`, a channels-last tensor),
`install` handed it the view as it was: each row read from the wrong place, wrong outputs, silently.

True verdict: the installed kernel gives the block's output on any layout of its input (it was judged on
contiguous tensors, so it is handed contiguous ones). Got: wrong outputs on a transposed input.
"""

import torch
import torch.nn.functional as F
from torch import nn


def as_stored(t: torch.Tensor) -> torch.Tensor:
    """t's storage read in order, as a raw pointer into it reads it."""
    return torch.as_strided(t, t.shape, torch.empty(t.shape).stride(), t.storage_offset())


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, gate = F.linear(as_stored(x), self.up.weight, self.up.bias).chunk(2, dim=-1)
        return F.linear(value * F.gelu(gate, approximate="tanh"), self.down.weight, self.down.bias)
