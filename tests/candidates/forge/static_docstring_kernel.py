"""Forge (class 7, static checks): no kernel at all, PyTorch does the work, and --strict is happy.

What it does: the only "kernel" is the word load_inline in this docstring (the no_custom_kernel
check searches every string constant, docstrings included), and the compute is a tensor *method*,
`x.clamp(min=0)` (the torch_compute_ops check only looks for torch.<op>(...) and F.<op>(...)
calls). Zero warnings, so `--strict` passes it.

Defeats: the kernel and PyTorch-op checks (docstrings counted as code; methods not counted).
Correct verdict under --strict: `rejected` (no custom kernel; computes with a PyTorch op).
Today: `correct` with no warnings, also under --strict (~1x: it is torch's own ReLU).
"""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp(min=0)
