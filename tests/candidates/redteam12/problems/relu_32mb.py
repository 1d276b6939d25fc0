"""ReLU on 32 MB a call: every input the timing loop draws, and every output, is at glibc's largest mmap
threshold (32 MiB on 64-bit), so each is a fresh mapping faulted in page by page unless the process's
allocator is told otherwise. Cheap to draw (one random value per row, repeated), so the page faults are
most of the loop's work and of the kernel's."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 1).repeat(1, 131072)]


def get_init_inputs():
    return []
