"""An elementwise product of two bfloat16 tensors (a gate times its values, as a bf16 model's MLP computes it)."""

import torch
import torch.nn as nn

ROWS, COLS = 256, 512


class Model(nn.Module):
    def forward(self, a, b):
        return a * b


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=torch.bfloat16), torch.randn(ROWS, COLS, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
