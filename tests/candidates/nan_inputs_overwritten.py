"""Writes zeros over the NaN of its input (the caller's tensor) and then takes the plain mean over what was
measured: the right numbers, but the caller's data is destroyed. `incorrect` ("changed its inputs in place");
it was `correct` while NaN in an input made the reference look as if it changed its inputs too (NaN is not
equal to itself), which switched the check off."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        seen = ~x.isnan()
        x.nan_to_num_(0.0)
        return x.sum(-1) / seen.sum(-1)
