"""Hang: starts a long-lived child process, then loops forever."""
import subprocess
import sys

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # kevin-hang-child"])
        with open("child.pid", "w") as f:
            f.write(str(child.pid))
        while True:
            pass
