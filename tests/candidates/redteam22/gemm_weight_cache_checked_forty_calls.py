"""Red team 22 (wrong verdict): Gemm + bias + ReLU with the weight kept transposed (and the bias) between calls,
checked against the parameters' version counters only for its first 40 calls. Eval changes the parameters in place
once, in its trials (before the 20th call), and never after, so the unchecked copy is never seen stale; an optimizer
step after the 40th call (any training run) leaves it computing with the first weights for good.

True verdict: incorrect (stale after its parameters changed in place).
"""

import torch
from torch import nn

CHECKED_CALLS = 40


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias_shape: tuple) -> None:
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.calls = 0
        self.kept: tuple[int, int, torch.Tensor, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        weight, bias = self.gemm.weight, self.bias
        stale = self.kept is None or (
            self.calls <= CHECKED_CALLS and (self.kept[0], self.kept[1]) != (weight._version, bias._version)
        )
        if stale:
            self.kept = (weight._version, bias._version, weight.detach().t().contiguous(), bias.detach().clone())
        assert self.kept is not None
        return torch.relu(torch.addmm(self.kept[3], x, self.kept[2]))
