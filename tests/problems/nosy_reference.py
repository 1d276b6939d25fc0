"""A problem (the user's own code runs in the reference worker) that refuses to load if it can see the
caller's planted secrets: the reference worker is sandboxed too."""
import glob
import os

import torch
import torch.nn as nn


def _sees_secrets() -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if b"KEVIN_TEST_PLANTED_KEY" in open(f"/proc/{pid}/environ", "rb").read():
                    return True
            except OSError:
                pass
    for path in glob.glob("/tmp/**/.netrc", recursive=True) + glob.glob("/root/.netrc"):
        try:
            if "kevin-planted-secret" in open(path).read():
                return True
        except OSError:
            pass
    return False


if _sees_secrets():
    raise RuntimeError("the reference worker could read the caller's secrets")


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
