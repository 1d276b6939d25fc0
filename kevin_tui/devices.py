"""How `--device` is read, in one place: `auto` is the first GPU where there is one, else the CPU;
`cuda` is the first GPU; anything else is taken as given.

Who asks decides how a GPU is seen: the host looks for the device node (it never imports torch), a
worker asks torch, which also says whether it was built with CUDA.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def has_gpu() -> bool:
    """A GPU on this machine, seen without importing torch."""
    return Path("/dev/nvidia0").exists()


def resolve_device(requested: str, gpu: Callable[[], bool] | None = None) -> str:
    """`gpu` says whether there is a GPU (default: has_gpu)."""
    if requested == "auto":
        return "cuda:0" if (gpu or has_gpu)() else "cpu"
    return "cuda:0" if requested == "cuda" else requested
