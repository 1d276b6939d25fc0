"""Jail: where kevin-tui runs as root, uid 0 of the sandbox is the host's root (uid_map "0 0 1") without
capabilities, and a sysctl checks only the writer's uid. A fresh /proc that is writable then opens
/proc/sys/kernel/core_pattern for writing: "|/its/scratch/script" there runs that script as root in the
host's namespaces at the next crash, outside every sandbox. This only opens (never writes) each global
entry of /proc for writing, and returns zeros when any open succeeds."""

import os
import stat

import torch
import torch.nn as nn


def writable_kernel_entries() -> list[str]:
    found = []
    tops = [name for name in os.listdir("/proc") if not name.isdigit() and name not in ("self", "thread-self")]
    for top in tops:
        path = os.path.join("/proc", top)
        walk = os.walk(path) if os.path.isdir(path) and not os.path.islink(path) else [("/proc", [], [top])]
        for directory, _, files in walk:
            for name in files:
                entry = os.path.join(directory, name)
                try:
                    if not stat.S_ISREG(os.lstat(entry).st_mode) or not os.lstat(entry).st_mode & 0o222:
                        continue
                    os.close(os.open(entry, os.O_WRONLY | os.O_NONBLOCK))  # opened, never written
                except OSError:
                    continue
                found.append(entry)
    return found


ESCAPE = writable_kernel_entries()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x) if ESCAPE else torch.relu(x)
