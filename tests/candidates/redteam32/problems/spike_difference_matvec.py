"""Red team 32's problem: a long reduction whose float32 rounding comes from a parameter, not an input. The input is
an int8 difference of two spike trains (each of K / 2 positions fires once into each train, so the counts balance to
zero); the weights are gains near 1. Every output is ~0.2, and the float32 reference's own rounding over 131072
terms of ~1 (~1e-3) is past the 1e-4 tolerance there. Nudging the int8 input moves nothing, so the draws of the
reference's own error (own_error.py) repeated the judged call's error unless the parameter is nudged too."""

import torch
import torch.nn as nn

M = 128
K = 131072


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(1 + 1e-3 * torch.randn(M, K))

    def forward(self, spikes: torch.Tensor) -> torch.Tensor:
        return self.weight @ spikes.to(self.weight.dtype)


def get_inputs():
    fired = torch.randint(-1, 2, (K // 2,), dtype=torch.int8)
    return [torch.cat([fired, -fired])[torch.randperm(K)].view(K, 1)]


def get_init_inputs():
    return []
