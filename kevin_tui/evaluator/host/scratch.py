"""Evaluation scratch directories, and the sweep that removes those whose owner died.

Each evaluator keeps its inputs, outputs and logs in a temporary directory (hundreds of MB on
large problems) and removes it on `close()`. A caller killed with SIGKILL never gets there, so
each directory records its owner (pid and the process's start time, which survives pid reuse)
and the next evaluator on the machine removes directories whose owner is gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from kevin_tui.evaluator.host.cgroups import sweep_orphans
from kevin_tui.processes import process_start

PREFIX = "kevin-eval-"
OWNER_FILE = ".owner"


def make_scratch() -> Path:
    """A fresh scratch directory stamped with its owner; stale ones from dead owners are swept first, and
    so are the cgroups (and any process still in them) of a dead kevin-tui."""
    sweep_stale(Path(tempfile.gettempdir()))
    sweep_orphans()
    scratch = Path(tempfile.mkdtemp(prefix=PREFIX))
    (scratch / OWNER_FILE).write_text(f"{os.getpid()} {process_start(os.getpid())}\n")
    return scratch


def owner_alive(scratch: Path) -> bool:
    """True while the process that made `scratch` runs (or when that cannot be told: keep it)."""
    try:
        pid_text, start = (scratch / OWNER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return True  # not ours, or being written this instant
    return process_start(pid) == start


def sweep_stale(directory: Path) -> list[Path]:
    """Remove scratch directories under `directory` whose owner has died; return those removed."""
    removed = []
    for scratch in directory.glob(f"{PREFIX}*"):
        if scratch.is_dir() and not owner_alive(scratch):
            shutil.rmtree(scratch, ignore_errors=True)
            removed.append(scratch)
    return removed


def given_dir(worker_scratch: Path) -> Path:
    """The directory the host fills for the candidate worker whose scratch is `worker_scratch`, bound
    read-only into its sandbox: a private copy of the problem file, and only the libraries built for it
    (not the build cache, where every build's sources and libraries lie)."""
    return worker_scratch.with_name(worker_scratch.name + "-given")


def hand_out(library: Path, worker_scratch: Path) -> Path:
    """Copy a verified library to where that worker can load it, in a directory named like its build's,
    and return the path the worker is told. A copy, not a hard link: a link would change the cached
    file's ctime, which the broker's tamper check watches."""
    target = given_dir(worker_scratch) / library.parent.name / library.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        shutil.copyfile(library, target)
    return target
