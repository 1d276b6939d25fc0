"""Honest: the mean over what was measured, with the NaN masked out and the input left alone (`correct`)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        seen = ~x.isnan()
        return torch.where(seen, x, 0).sum(-1) / seen.sum(-1)
