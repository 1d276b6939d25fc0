"""Honest (must stay `correct`): ReLU that remembers its last answer keyed on the input's address and its version
counter (every in-place write through torch moves it on), as a kernel reusing a result while its input is untouched
may. The counterpart of address_memo_eval.py: right in every trial, including a few values changed in place (that
write moves the version on, so it misses).

GOT 2026-12-03 after the fix: `correct` (tests/test_redteam20.py -k versioned).
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.memo: tuple[tuple, torch.Tensor, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (x.data_ptr(), x._version, tuple(x.shape), x.dtype)
        if self.memo is not None and self.memo[0] == key and self.memo[1] is x:
            return self.memo[2].clone()
        out = torch.relu(x)
        self.memo = (key, x, out.clone())
        return out
