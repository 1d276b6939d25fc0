"""Cheat (GPU): launches the work on a side stream and returns before it is done."""
import torch
import torch.nn as nn

_side = torch.cuda.Stream()


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        _side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_side):
            for _ in range(50):
                torch.clamp(x, min=0, out=out)
        return out
