import torch.nn as nn

raise ValueError("setup failed")


class ModelNew(nn.Module):
    def forward(self, x):
        return x
