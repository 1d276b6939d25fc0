"""A small convolution in KernelBench form (with parameters: weight and bias count as traffic)."""
import torch
import torch.nn as nn

batch, channels, out_channels, size, kernel = 2, 3, 8, 16, 3


class Model(nn.Module):
    def __init__(self, channels, out_channels, kernel):
        super().__init__()
        self.conv = nn.Conv2d(channels, out_channels, kernel)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch, channels, size, size)]


def get_init_inputs():
    return [channels, out_channels, kernel]
