"""WRONG SPEEDUP in apply --check (unit-demonstrated): a kernel that remembers its last answer for the very tensor
object it was given, at the same version (`tensor._version`), and returns it again.

(1) Attack: the answer is always right (the same object at the same version holds the same values), so every
    judge passes it, and `kevin-tui eval` never sees a hit (each call's inputs there are fresh tensors): correct,
    at its honest speed. `apply --check` times the model with the kernel on the check's inputs, the same objects
    call after call (check.inference), so every timed call after the first is a hit: the speedup reported for
    the user's model is the memo's, not the kernel's; in training the inputs are new each step and it is 1x.
(2) TRUE figure: the speedup of the plain computation (about 1.0x here: the memo wraps torch's own linear).
(3) GOT 2026-12-02, before the fix: check.timed(inference(model), inference(memo)) -> 18.6x (interval ~16-20x on
    this 2-core machine, 20 rounds); after: about 1.0x.
    Command: python3 -m pytest -q -p no:xdist -o addopts="" tests/test_redteam16.py -k memo
(4) Weakness: check.inference/training_step called the model on the same tensors every time; now each call's
    tensors have their version counter moved on first (torch.autograd.graph.increment_version, O(1), both arms
    alike), so a memo keyed on identity and version cannot hit. A memo keyed on part of the values is eval's
    changed-inputs trial's to catch.
"""

import weakref

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int = 512):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self._memo: tuple | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        memo = self._memo
        if memo is not None and memo[0]() is x and memo[1] == x._version and not torch.is_grad_enabled():
            return memo[2]
        out = self.proj(x)
        self._memo = (weakref.ref(x), x._version, out)
        return out
