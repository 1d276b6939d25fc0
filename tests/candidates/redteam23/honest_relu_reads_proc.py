"""Honest: reads what a kernel's host code reads from /proc (CPU and memory facts, its own status and
maps, a sysctl) and computes ReLU; a read-only /proc must still give it all of that."""

import os

import torch
import torch.nn as nn

CPUS = open("/proc/cpuinfo").read().count("processor")
MEMORY = open("/proc/meminfo").readline()
MAPS = len(open("/proc/self/maps").read().splitlines())
STATUS = open(f"/proc/{os.getpid()}/status").read()
PID_MAX = int(open("/proc/sys/kernel/pid_max").read())
assert CPUS > 0 and MEMORY.startswith("MemTotal") and MAPS > 0 and "Threads" in STATUS and PID_MAX > 0


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
