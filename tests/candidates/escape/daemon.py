"""Escape: double-forks a setsid daemon that sleeps for ten minutes (its command line carries a marker)."""
import os
import subprocess
import sys

import torch
import torch.nn as nn

if os.fork() == 0:
    os.setsid()
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # kevin-escape-daemon"],
                     start_new_session=True, stdin=subprocess.DEVNULL)
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
