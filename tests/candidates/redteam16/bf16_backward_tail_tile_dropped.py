"""WRONG, PASSED apply --check (unit-demonstrated): a bf16 backward kernel whose weight gradient leaves its last
8x8 tile at zero (a tile loop that stops one tile short: the classic tail bug), judged by `compare_norm`.

(1) Attack: `apply --check` compares gradients and the parameters after optimizer steps with `compare_norm`
    (kevin_tui/usermodel/check.py): a tensor outside the elementwise tolerance still matches when its relative
    L2 error is within rtol (bf16: 1e-2). In a large tensor a few values that are simply wrong hardly move the
    norm: 64 zeroed values of a 1024x1024 bf16 gradient, up to 2.25 off, are a relative L2 error of 0.8%.
(2) TRUE verdict: the check fails (those 64 gradient values are wrong; training with it updates that tile
    with nothing).
(3) GOT 2026-12-02, before the fix: `compare_norm(g, g_with_tail_tile_zeroed)` -> (None, 2.25), i.e. the
    gradient matches; after: "a value is 2.25 off, more than 10x rtol of the largest (0.475)".
    Command: python3 -m pytest -q -p no:xdist -o addopts="" tests/test_redteam16.py -k tail
    (end to end through `apply --check` not run: the C++ builds of a bf16 block did not fit this session.)
(4) Weakness: compare_norm accepted any elementwise error once the L2 norm was close; now no value may be further
    off than FAR_SHARE (10) x rtol x the tensor's largest value.

The backward below is this bug for a Linear of `dim` -> `dim` in bf16 (the weight gradient's last 8x8 tile unset).
"""

import torch
import torch.nn as nn

TILE = 8


class _TailDroppingLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.t() + bias

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        flat_x, flat_g = x.reshape(-1, x.shape[-1]), grad.reshape(-1, grad.shape[-1])
        grad_w = flat_g.t() @ flat_x
        grad_w[-TILE:, -TILE:] = 0  # the tile loop stops one tile short
        return grad @ weight, grad_w, flat_g.sum(0)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1024):
        super().__init__()
        self.proj = nn.Linear(dim, dim).to(torch.bfloat16)

    def forward(self, x):
        return _TailDroppingLinear.apply(x, self.proj.weight, self.proj.bias)
