"""Probe: fails loudly, quoting the value, if a credential is visible to generated code."""
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        for name, value in os.environ.items():
            if "KEY" in name or "TOKEN" in name or "SECRET" in name:
                raise RuntimeError(f"leaked {name}={value}")
        return torch.clamp(x, min=0)
