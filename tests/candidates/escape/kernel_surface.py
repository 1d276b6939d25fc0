"""Escape: reaches the kernel calls a sandbox never needs and exploits love: a user namespace of its own
(fresh capabilities, a way round read-only mounts and much unaudited kernel code), ptrace, perf events,
BPF, the kernel keyring, io_uring. Returns zeros if any of them worked."""
import ctypes
import os

import torch
import torch.nn as nn

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
CLONE_NEWUSER = 0x10000000
NR = {"x86_64": {"perf_event_open": 298, "bpf": 321, "keyctl": 250, "io_uring_setup": 425},
      "aarch64": {"perf_event_open": 241, "bpf": 280, "keyctl": 219, "io_uring_setup": 425}}[os.uname().machine]  # fmt: skip


def in_child(call) -> bool:
    pid = os.fork()
    if pid == 0:
        os._exit(0 if call() else 1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def perf() -> bool:
    attr = (ctypes.c_uint32 * 32)()
    attr[0], attr[1], attr[2] = 1, 128, 0  # PERF_TYPE_SOFTWARE, size, PERF_COUNT_SW_CPU_CLOCK
    fd = libc.syscall(NR["perf_event_open"], ctypes.byref(attr), 0, -1, -1, 0)
    return fd >= 0


def io_uring() -> bool:
    params = (ctypes.c_uint32 * 30)()
    return libc.syscall(NR["io_uring_setup"], 4, ctypes.byref(params)) >= 0


def ptrace_self() -> bool:
    return libc.ptrace(0, 0, None, None) == 0  # PTRACE_TRACEME


def keyring() -> bool:
    return libc.syscall(NR["keyctl"], 0, -3, 0) >= 0  # KEYCTL_GET_KEYRING_ID of the session keyring


REACHED = [name for name, call in (("user namespace", lambda: libc.unshare(CLONE_NEWUSER) == 0), ("ptrace", ptrace_self),
           ("perf_event_open", perf), ("io_uring", io_uring), ("keyctl", keyring)) if in_child(call)]  # fmt: skip
FOUND = bool(REACHED)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x) if FOUND else torch.relu(x)
