"""Red team 32's problem: x plus the transformer's sinusoidal position code, built in the forward in the input's
dtype (so the float64 run builds it in float64). In float32 the angle position * frequency rounds to ~2.4e-4 at
position 4096, past the 1e-4 tolerance at outputs near 1; that rounding is the positions', which no nudge of x moves,
so every draw of the reference's own error (own_error.py) repeats the judged call's."""

import math

import torch
import torch.nn as nn

L = 4096
D = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        position = torch.arange(L, dtype=x.dtype, device=x.device).unsqueeze(1)
        frequency = torch.exp(torch.arange(0, D, 2, dtype=x.dtype, device=x.device) * (-math.log(10000.0) / D))
        code = torch.empty(L, D, dtype=x.dtype, device=x.device)
        code[:, 0::2] = torch.sin(position * frequency)
        code[:, 1::2] = torch.cos(position * frequency)
        return x + code


def get_inputs():
    return [torch.randn(2, L, D)]


def get_init_inputs():
    return []
