"""Red team 21: tests/problems/complex_product.py (a complex64 product) with its inputs cut to 17 mantissa bits:
inside float32's tolerance part by part, so the judge passes it, but six bits narrower than the problem's float32.
The precision evidence skipped every complex output.

TRUE verdict: correct with a `lower_precision` warning (rejected under --strict).
Before (main 44b8e6d): `correct`, `evidence.precision` None, no warning.
"""

import torch
import torch.nn as nn


def narrowed(t):
    bits = t.contiguous().view(torch.int32)
    return (bits & ~((1 << 6) - 1)).view(torch.float32)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.view_as_complex(narrowed(a)) * torch.view_as_complex(narrowed(b))
