"""Compiler errors remembered by the full key of what was built.

The same sources, flags and toolchain fail the same way, so a build sent again (a retry, a replay, the same
mistake in the next turn, a test run again) gets its errors at once instead of another minute of nvcc, often
two (a failed light-header build is tried again with the standard headers). Only the compiler's own errors
are kept: not a builder that crashed, ran out of time, memory or disk, and not a missing file or library,
which the user may install; a compiler whose binary changed forgets them. Kept beside the manifests, where
no sandbox writes.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
from pathlib import Path
from typing import Any

COMPILER_FAILED = "ninja: build stopped"  # what torch's build says when a compile or link step failed
# The machine's state, not the sources: a missing library, a compiler's own crash, memory running out, and every
# text the operating system gives an error (errno: a full disk, a process limit, a file the user may add) or a
# signal (a tool killed by the out-of-memory killer or a file-size limit: gcc's "ld terminated with signal 9
# [Killed]", nvcc's "'cicc' died due to signal 9 (Kill signal)"). Forgetting costs a build; remembering one of
# these hid a build that would succeed (tests/test_redteam21.py).
UNSTABLE = ("cannot find -l", "internal compiler error", "out of memory", "virtual memory exhausted",
            *sorted({os.strerror(number) for number in errno.errorcode}),
            *sorted({signal.strsignal(number) or "" for number in signal.valid_signals()} - {""}))  # fmt: skip
SIGNALLED = re.compile(r"\bsignal\b", re.IGNORECASE)  # "died due to signal 9", "terminated with signal", "signal 11"
KEPT = ("log", "message", "headers", "prelude_lines")


def toolchain(env: dict[str, str]) -> list[Any]:
    """The identity (path, size, mtime) of nvcc and of the host compiler the builder runs."""
    compilers = [Path(env.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"]
    if cxx := shutil.which(env.get("CXX", "c++"), path=env.get("PATH")):
        compilers.append(Path(cxx))
    found = []
    for compiler in compilers:
        try:
            info = os.stat(compiler)
        except OSError:
            continue
        found.append([str(compiler), info.st_size, info.st_mtime_ns])
    return found


def deterministic(log: str) -> bool:
    """The compiler's own errors, which the same inputs give again."""
    return COMPILER_FAILED in log and not any(marker in log for marker in UNSTABLE) and not SIGNALLED.search(log)


class FailedBuilds:
    def __init__(self, manifests: Path, env: dict[str, str]) -> None:
        self.root = manifests
        self.toolchain = toolchain(env)

    def _path(self, entry: str) -> Path:
        return self.root / f"failed-{entry}.json"

    def recall(self, entry: str) -> dict[str, Any] | None:
        """The failure remembered for `entry` with this toolchain, else None."""
        try:
            failure = json.loads(self._path(entry).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(failure, dict) or failure.get("toolchain") != self.toolchain:
            return None
        if not all(isinstance(failure.get(k), int if k == "prelude_lines" else str) for k in KEPT):
            return None
        return failure

    def remember(self, entry: str, failure: dict[str, Any]) -> None:
        if not deterministic(failure["log"]):
            return
        kept = {k: failure[k] for k in KEPT} | {"toolchain": self.toolchain}
        temporary = self.root / f".failed-{entry}.json.{os.getpid()}"
        temporary.write_text(json.dumps(kept))
        os.replace(temporary, self._path(entry))
