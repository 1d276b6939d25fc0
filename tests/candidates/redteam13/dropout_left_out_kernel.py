"""Red team 13: a kernel for a block with dropout, made from its problem in eval mode (`--mode eval`, as the
extraction asks for dropout), that leaves the dropout out: right in eval mode, where the evaluator and `apply
--check` judged it. `install(model)` then swapped it into the model in train mode as well, so training ran
without dropout, and the check (in eval mode: outputs, gradients, SGD/AdamW steps, compile) passed.

True verdict: apply --check passes only for eval mode; in training the block's own forward must run.
Got before the fix: passed, helper used the kernel in train mode (a max difference of 0.45 there, no zeros).
After: "the kernel runs in eval mode only: in train mode its outputs differ ..."; MODES = ('eval',) in the helper,
whose train-mode forward is DropGate's own (the same output at the same seed).
Command (in a git repository holding dropnet/ and the problem made from dropnet/blocks.py:DropGate in eval mode,
this file copied to problems/blocks_DropGate_kernel.py):
  python3 -m kevin_tui apply problems/blocks_DropGate_kernel.py --check --no-compile
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    """DropGate's eval-mode computation (no dropout)."""

    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.nn.functional.gelu(self.proj(x))
