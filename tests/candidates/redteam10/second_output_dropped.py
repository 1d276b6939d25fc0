"""For tests/problems/sums_and_tanh.py (outputs: row sums, tanh(x)): returns (row sums, None), never computing tanh.

Attack (redteam10): the judge's float64 fallback (a trial outside tolerance judged again against the float64
result, with the float32 reference's own error allowed) paired the float tensors of the reference, its float64
result and the candidate's output and judged only those: a later output that is None, a Python number, a list
of the wrong length, or a tensor of another dtype or device was never looked at. The candidate triggers the
fallback itself: one row sum is moved just past the tolerance, towards the float64 sum (which it computes for one
row), so it is outside tolerance of the float32 reference but within that reference's own error of float64.
TRUE verdict: incorrect ("output 1: returned a NoneType, not a plain torch.Tensor").
Got before the fix: correct (every trial and every timed output "within the float32 reference's own error").
"""

import torch
import torch.nn as nn


def _past_the_tolerance(sums: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The row whose float32 sum is furthest from its float64 sum, moved just past the judge's tolerance
    towards the float64 sum (the judge's defaults: atol = rtol = 1e-4, atol at most rtol * the largest value)."""
    exact = x.double().sum(dim=-1)
    row = int((exact - sums.double()).abs().argmax())
    value = float(sums[row])
    tolerance = min(1e-4, 1e-4 * float(sums.abs().max())) + 1e-4 * abs(value)
    direction = 1.0 if float(exact[row]) > value else -1.0
    moved = torch.tensor(value + direction * tolerance, dtype=torch.float32)
    while abs(float(moved) - value) <= tolerance:
        moved = torch.nextafter(moved, torch.tensor(direction * float("inf")))
    sums = sums.clone()
    sums[row] = moved
    return sums


class ModelNew(nn.Module):
    def forward(self, x):
        return _past_the_tolerance(x.sum(dim=-1), x), None
