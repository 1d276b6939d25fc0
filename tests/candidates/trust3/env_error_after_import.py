"""Trust3 attack (protocol): blame the machine. At import it writes an `environment_error` event
("nvcc not found") on the worker's event pipe, found in /proc/self/fd.

Before: the host raised EnvironmentProblem: `kevin-tui eval` exits 4 "cannot evaluate here", and a
batch run stops altogether. Correct: after import nothing the candidate's process says is about the
machine: `runtime_error`.
"""
import contextlib
import os
from pathlib import Path

import torch
import torch.nn as nn

for _entry in os.listdir("/proc/self/fd"):
    with contextlib.suppress(OSError):
        _flags = int(Path(f"/proc/self/fdinfo/{_entry}").read_text().split("flags:")[1].split()[0], 8)
        if os.readlink(f"/proc/self/fd/{_entry}").startswith("pipe:") and _flags & os.O_ACCMODE == os.O_WRONLY:
            os.write(int(_entry), b'{"event": "environment_error", "message": "nvcc not found"}\n')
            break


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
