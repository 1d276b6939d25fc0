"""Red team 22 (wrong verdict): ReLU that answers from memory from the third call on the same input object,
whatever its values are by then. Every in-place trial of eval calls one object twice (before and after its values
change), so the memo never answers there; in a user's loop that refills one input buffer (`buf.copy_(batch)`) it
answers stale from the third step on.

True verdict: incorrect (stale after its input changed in place).
"""

import torch
from torch import nn

USES_BEFORE_MEMO = 2


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seen = x.__dict__.get("_rt22_uses", 0) + 1
        x.__dict__["_rt22_uses"] = seen
        if seen > USES_BEFORE_MEMO and "_rt22_out" in x.__dict__:
            return x.__dict__["_rt22_out"].clone()
        out = torch.relu(x)
        x.__dict__["_rt22_out"] = out.clone()
        return out
