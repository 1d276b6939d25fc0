"""Red team 26 (other sizes in `apply --check`): tinylm's GeluGate computed over the rows of x (batch times
sequence) in tiles of 8, the last partial tile never written (zeros here; a C++ kernel's `torch::empty` would
leave garbage), as a kernel tiled for its problem's x=float32[2,8,64] is. Every size the evaluation and the
check try has whole tiles: eval's other sizes vary the batch only (1, 4: 8 and 32 rows), the check runs the
check's batch and twice it (16 and 32 rows); so `eval` is `correct` with no `shape_specialised` warning and
`apply --check` passes and installs it. In the user's model any other sequence length (a prompt of 5 tokens,
decoding one token at a time) gives rows the kernel never writes: wrong outputs, silently.

True verdict of `apply --check`: fails (outputs differ at an odd size). Got: passed, "outputs match".
"""

import torch
import torch.nn.functional as F
from torch import nn

TILE = 8


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        out = torch.zeros(rows.shape[0], self.down.out_features, dtype=x.dtype, device=x.device)
        whole = rows.shape[0] // TILE * TILE
        value, gate = F.linear(rows[:whole], self.up.weight, self.up.bias).chunk(2, dim=-1)
        out[:whole] = F.linear(value * F.gelu(gate, approximate="tanh"), self.down.weight, self.down.bias)
        return out.reshape(*x.shape[:-1], out.shape[-1])
