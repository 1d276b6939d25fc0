"""tinylm's GeluGate in plain torch and bfloat16 (the gate's GELU from F.gelu), as a bf16 problem asks
for it. FLOAT32_OUTPUT returns float32 instead, which a bf16 problem rejects."""

import torch
import torch.nn as nn
import torch.nn.functional as F

FLOAT32_OUTPUT = False


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden)
        self.down = nn.Linear(hidden, dim)
        self.to(torch.bfloat16)

    def forward(self, x):
        value, gate = self.up(x).chunk(2, dim=-1)
        out = self.down(value * F.gelu(gate, approximate="tanh"))
        return out.float() if FLOAT32_OUTPUT else out
