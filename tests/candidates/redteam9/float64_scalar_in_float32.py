"""Red team 9 (a float64 problem returning a Python number, e.g. `.item()` of a float64 tensor): the number
computed in float32 (a float16 one is caught: 1e-2 off). A Python float is judged with the
tolerance of torch's default dtype (float32: 1e-4 relative) whatever dtype the reference computed it in,
so a float64 problem's scalar is judged ~1000x more loosely than its tensor outputs (1e-7) would be.

TRUE verdict: incorrect (at the float64 tolerance the problem's dtype implies). Problem: tests/problems/float64_scalar.py.
Got: correct, no precision evidence. Fixed (trust10): a Python number is judged in the widest float dtype among the
reference's inputs and parameters (judge.widest_float), and the precision evidence covers it.
"""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.float()
        return float((x * x).mean() - x.mean() ** 2)
