"""Red team 30 (a wrong kernel passed by the float64 fallback's spread allowance): on red team 28's bf16 matmul
(tests/candidates/redteam28/problems/bf16_matmul.py, outputs ~N(0, 32)) it sums in float32 and rounds each sum to a
fixed-point grid of 1/16 before bfloat16: above 8, where a bf16 step is 1/16 or more, that is bf16's own rounding;
below it every output loses its low bits, and near zero, where the tolerance is 1e-2, it errs by up to 1/32 (an output
of 0.03 is returned as 0.0625 or 0).

The fallback allowed at each place 4 times the float32 reference's root mean square own error over the tensor's other
places, and a bf16 output's own error is its rounding to bf16 (up to 1/8 at 32-64): ~0.2 at every place, so the
outputs near zero passed at 3 times their tolerance.

True verdict: incorrect. Seen before the fix: correct (see tests/test_redteam30.py for the warnings seen)."""

import torch
import torch.nn as nn

GRID = 1 / 16


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        total = a.float() @ b.float()
        return (torch.round(total / GRID) * GRID).to(torch.bfloat16)
