"""Correct pure PyTorch that notes, in its working directory, whether torch._dynamo was imported before it
and after the op of each call of its forward (the last call is the op count's, under the host's dispatch mode)."""
import sys

import torch
import torch.nn as nn


def note(when: str) -> None:
    with open("dynamo-imported.txt", "a") as notes:
        notes.write(f"{when} {'torch._dynamo' in sys.modules}\n")


note("import")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.clamp(x, min=0)
        note("forward")
        return out
