"""Escape: tries to write into the problem's directory, the build cache (its manifests too) and the tests'
temporary directories; returns zeros if it could change a file that was already there. (New files it
manages to create land, in a sandbox, in a private /tmp: the test checks the real directories.)"""
import glob
import os

import torch
import torch.nn as nn

import kevin_reference  # the problem, imported by the worker: its file tells where the project is


def landed() -> bool:
    targets = [os.path.join(os.path.dirname(kevin_reference.__file__), "kevin-escape.txt")]
    for pattern in ("/root/.cache/kevin-tui/builds/*/.kevin-manifest.json", "/tmp/*/builds/*/.kevin-manifest.json",
                    "/tmp/kevin-test-cache-*/builds/*/.kevin-manifest.json", "/tmp/pytest-of-*/*/*/planted.txt"):
        targets += glob.glob(pattern)
    for build_root in glob.glob("/tmp/kevin-test-cache-*/builds") + glob.glob("/tmp/*/builds"):
        targets.append(os.path.join(build_root, "kevin-escape.txt"))
    wrote = False
    for target in targets:
        existed = os.path.exists(target)
        try:
            with open(target, "a") as handle:
                handle.write("kevin-escape")
            wrote = wrote or existed
        except OSError:
            continue
    return wrote


FOUND = landed()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x) if FOUND else torch.relu(x)
