"""Honest (must stay `correct`): Gemm + bias + ReLU with the weight kept transposed (and the bias) between calls,
checked against the parameters' version counters on every call. The twin of gemm_weight_cache_checked_forty_calls.py:
the in-place trial after the timed calls changes the parameters and this copy follows them.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias_shape: tuple) -> None:
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.kept: tuple[int, int, torch.Tensor, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.gemm.weight, self.bias
        if self.kept is None or (self.kept[0], self.kept[1]) != (weight._version, bias._version):
            self.kept = (weight._version, bias._version, weight.detach().t().contiguous(), bias.detach().clone())
        assert self.kept is not None
        return torch.relu(torch.addmm(self.kept[3], x, self.kept[2]))

