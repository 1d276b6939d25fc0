"""The build cache on disk: what it holds and how to empty it (`kevin-tui cache`).

Builds are small (one library and its objects per source); precompiled headers are ~750 MB each,
one per set of compiler flags, and are capped (KEVIN_TUI_PCH_MAX_GB, default 3) with the least
recently used removed first (see worker/pch.py).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

PARTS = ("builds", "pch")


@dataclass
class Usage:
    entries: int
    bytes: int


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def usage(root: Path) -> dict[str, Usage]:
    found = {}
    for part in PARTS:
        directory = root / part
        entries = [d for d in directory.iterdir() if d.is_dir()] if directory.is_dir() else []
        found[part] = Usage(len(entries), sum(_size(d) for d in entries))
    return found


def clean(root: Path, parts: tuple[str, ...] = PARTS) -> int:
    """Remove the given parts of the cache; the bytes freed."""
    freed = 0
    for part in parts:
        directory = root / part
        if directory.is_dir():
            freed += _size(directory)
            shutil.rmtree(directory, ignore_errors=True)
    return freed


def describe(root: Path) -> str:
    lines = [f"build cache: {root}"]
    for part, found in usage(root).items():
        what = "extension builds" if part == "builds" else "precompiled headers"
        lines.append(f"  {part:<7} {found.entries:5d} {what:<20} {found.bytes / (1 << 20):10.1f} MB")
    return "\n".join(lines)
