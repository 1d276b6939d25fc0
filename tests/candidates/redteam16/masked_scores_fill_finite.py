"""WRONG, PASSED apply --check (unit-demonstrated): a masked-scores kernel that writes 0 (or +inf) where the
model's block writes -inf, judged by `compare` (kevin_tui/usermodel/check.py).

(1) Attack: `compare` bounds each value by atol + rtol*|reference|; where the reference is infinite that bound is
    infinite and the difference (inf) is not greater than it, so any value there passed: 0, a finite fill, even
    +inf for -inf. Only NaN against a number was caught. The same compare judges the output, the gradients (through
    compare_norm) and the compiled model; its "largest difference" there was nan_to_num's 1.8e308, a finite number
    the torch.compile bar could then excuse.
(2) TRUE verdict: the check fails (a masked position that softmax should zero gets weight).
(3) GOT 2026-12-02, before the fix: compare(tensor([-inf, 1.]), tensor([0., 1.])) -> (None, 1.8e308), and
    (tensor([-inf, 1.]), tensor([inf, 1.])) -> (None, 1.8e308); after: "1 of 2 values outside tolerance", inf.
    Command: python3 -m pytest -q -p no:xdist -o addopts="" tests/test_redteam16.py -k infinit
    (end to end through `apply --check` not run in this session.)
(4) Weakness: compare's tolerance test; now NaN or an infinity on either side matches only the same value there.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """For a block `scores.masked_fill(mask, float("-inf"))`: fills 0 instead (as a kernel with a wrong constant)."""

    def forward(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.where(mask, torch.zeros((), dtype=scores.dtype), scores)
