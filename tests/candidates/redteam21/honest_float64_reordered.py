"""Red team 21, the honest counterpart of float64_problem_in_float32.py (tests/problems/relu_and_sums_float64.py):
everything in float64, the row sums in another order (64 partial sums of 64 values, compensated, added last to
first). TRUE verdict: correct, no `lower_precision` (its error is ~1e-8 of float64's tolerance)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        parts = x.reshape(x.shape[0], 64, -1).sum(-1).flip(-1)
        total = torch.zeros_like(parts[:, 0])
        carry = torch.zeros_like(total)
        for i in range(parts.shape[1]):  # Kahan: another rounding than torch's, never a coarser one
            y = parts[:, i] - carry
            t = total + y
            carry = (t - total) - y
            total = t
        return torch.relu(x), total
