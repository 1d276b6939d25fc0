"""Honest: keeps files and a directory of its own in its scratch (a kernel's cache of tuned launch
parameters), under names the host never uses, and computes ReLU."""

import json
from pathlib import Path

import torch
import torch.nn as nn

CACHE = Path(__file__).resolve().parent / "tuning-cache"
CACHE.mkdir(exist_ok=True)
(CACHE / "relu.json").write_text(json.dumps({"block": 256}))


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
