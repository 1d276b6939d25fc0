"""Attack: a thread started at import (so never a "new" thread after any call) copies 64 MB over and over whenever
the worker's main thread is waiting for the host's next command, and idles while it runs. Every timed round is the
main thread's (and the reference's rounds find the candidate frozen), but the reference measured this CPU's peaks
(memory bandwidth, FP32 rate) right after the timing, with the candidate running: the figures it measured beside the
copies were kept in the cache directory for every later evaluation on the machine (lower bandwidth: every later
kernel's speed-of-light bound higher, honest kernels "faster than the reference's work allows: ... a cheat").
Computes ReLU; each copy is logged (its start and end, CLOCK_MONOTONIC) for the test to compare with the measurement."""

import sys
import threading
import time

import torch
import torch.nn as nn

MAIN = threading.get_native_id()


def waiting() -> bool:
    try:
        with open(f"/proc/self/task/{MAIN}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "S"
    except OSError:
        return False


def copy_while_waiting() -> None:
    source = torch.ones(16 << 20)
    target = torch.empty_like(source)
    while True:
        if waiting():
            time.sleep(0.002)
            if waiting():
                for _ in range(4):
                    started = time.monotonic()
                    target.copy_(source)
                    print(f"copy {started:.6f} {time.monotonic():.6f}", file=sys.stderr, flush=True)
                continue
        time.sleep(0.001)


threading.Thread(target=copy_while_waiting, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
