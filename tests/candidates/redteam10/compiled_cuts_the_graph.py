"""tinylm's GeluGate (examples/tinylm/blocks.py) whose forward is the block's own PyTorch code in eager, so its
own autograd matches every gradient and `kevin-tui apply --check` installs it with BACKWARD = "kernel"; under
torch.compile it returns its output detached, so no gradient reaches the block's parameters or anything before it.

Attack (redteam10): `training_check.compiled` accepts a compiled model whose difference from eager is at most twice
torch.compile's own, measured by the largest absolute difference; a structural failure (no gradient, a wrong dtype
or shape, NaN where eager is finite) reports a difference of 0.0, so it is always within the bar.
TRUE verdict: `apply --check` FAILS ("compiled: no gradient reaches ... (the kernel cuts the graph)").
Got before the fix: passed, the helper written with BACKWARD = "kernel" and "torch.compile: 0 graph breaks".
"""

import torch
import torch.nn as nn

SQRT_2_OVER_PI = 0.7978845608028654


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        value, gate = self.up(x).chunk(2, dim=-1)
        out = self.down(value * (0.5 * gate * (1.0 + torch.tanh(SQRT_2_OVER_PI * (gate + 0.044715 * gate**3)))))
        if torch.compiler.is_compiling():
            return out.detach()
        return out
