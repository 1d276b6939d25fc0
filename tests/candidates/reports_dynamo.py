"""Correct pure PyTorch that notes, in its working directory, whether torch._dynamo was imported before it."""
import sys

import torch
import torch.nn as nn

with open("dynamo-imported.txt", "a") as note:
    note.write(f"{'torch._dynamo' in sys.modules}\n")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0)
