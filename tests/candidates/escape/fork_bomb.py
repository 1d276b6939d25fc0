"""Escape: forks until the system says no (10,000 children are asked for), then fails loudly."""
import os
import signal
import time

import torch.nn as nn

children = []
try:
    for _ in range(10_000):
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        children.append(pid)
finally:
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    for pid in children:
        os.waitpid(pid, 0)
raise RuntimeError(f"forked all {len(children)} children: no process limit")


class ModelNew(nn.Module):
    def forward(self, x):
        return x.relu()
