"""Honest but slow: the right answer, after a 5 ms nap per call (a speedup clearly below 1)."""
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(0.005)
        return torch.relu(x)
