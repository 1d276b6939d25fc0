"""Attack (redteam4): fill the host's disk through the candidate's scratch directory, the one place it may write
that lies on the host's disk. Each file stays under the 8 GiB per-file limit; nothing bounded their total, and
the files stayed until the evaluator closed (in batch, hours). This one writes 64 MB files, up to 1 GB (the
test lowers the bound to 64 MB), then computes an honest ReLU. Before the fix: `correct`, with 1 GB left in
scratch; a real attack would go on until the disk is full."""

from pathlib import Path

import torch
import torch.nn as nn

CHUNK = bytes(64 << 20)


def fill(limit: int = 16) -> None:
    for index in range(limit):
        with open(Path(__file__).parent / f"ballast-{index}.bin", "wb") as handle:
            handle.write(b"\x5a" * len(CHUNK))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        fill()

    def forward(self, x):
        return torch.relu(x)
