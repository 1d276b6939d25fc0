"""Red team 21, the honest counterpart of complex_output_narrowed.py (tests/problems/complex_product.py): the
product written out part by part in float32 (ac - bd, ad + bc). TRUE verdict: correct, no `lower_precision`."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        re = a[:, 0] * b[:, 0] - a[:, 1] * b[:, 1]
        im = a[:, 0] * b[:, 1] + a[:, 1] * b[:, 0]
        return torch.view_as_complex(torch.stack((re, im), -1))
