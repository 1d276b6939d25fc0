"""Escape: undoes every way the host kills a sandbox from inside it, then starts a long-lived process
(its command line carries the marker kevin-escape-survivor): it leaves the host's process group
(setsid), clears its death signal, rebinds os.killpg so that the lifeline thread kills nothing, and
moves itself into the root pids and memory cgroups (after remounting the cgroup tree writable)."""
import ctypes
import os
import subprocess
import sys

import torch
import torch.nn as nn

PR_SET_PDEATHSIG, MS_REMOUNT, MS_BIND = 1, 32, 4096
libc = ctypes.CDLL(None, use_errno=True)
try:
    os.setsid()
except OSError:
    pass
libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
os.killpg = lambda pgid, sig: None
for controller in ("pids", "memory", "unified", ""):
    root = os.path.join("/sys/fs/cgroup", controller)
    libc.mount(None, root.encode(), None, MS_REMOUNT | MS_BIND, None)
    try:
        with open(os.path.join(root, "cgroup.procs"), "w") as handle:
            handle.write(str(os.getpid()))
    except OSError:
        pass
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # kevin-escape-survivor"],
                 start_new_session=True, stdin=subprocess.DEVNULL)  # fmt: skip


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
