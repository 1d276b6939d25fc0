"""The CUDA toolkit's own tools that a second sandboxed worker runs under (Nsight Compute, compute-sanitizer):
where to find one, and what of it the sandbox must see."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from kevin_tui.evaluator.host.sandbox import Bind
from kevin_tui.evaluator.host.scratch import read_plain


def find_tool(name: str, places: Iterable[str] = ()) -> str | None:
    """`name` from PATH, the CUDA toolkit (`CUDA_HOME`, else /usr/local/cuda) or `places`, if executable."""
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    for candidate in (shutil.which(name), f"{cuda}/bin/{name}", *places):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def install_binds(tool: str) -> list[Bind]:
    """The tool's own files, read-only in the sandbox (the launcher script and the tree it points into)."""
    paths = {os.path.dirname(os.path.abspath(tool)), os.path.dirname(os.path.realpath(tool))}
    return [Bind(p) for p in sorted(paths)]


def read_log(log: Path, max_bytes: int) -> str:
    """The first `max_bytes` of a tool's log (the candidate's process can make it any size), '' if none."""
    return read_plain(log, max_bytes, tail=False).decode("utf-8", "replace")  # a link there is not followed
