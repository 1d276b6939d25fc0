"""The KernelBench problems kevin-tui ships, and the `kernelbench:` names every command accepts.

Levels 1 and 2 of KernelBench's original release (MIT; see LICENSE and README.md beside this file)
travel inside the package, so a clone or an installed wheel can run its examples and tests with
nothing beside it. `kernelbench:level1/19` (or `.../19_ReLU`, `.../19_ReLU.py`) names one problem,
`kernelbench:level2` a whole level (for batch). `KEVIN_TUI_KERNELBENCH` points at another copy laid
out the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

from kevin_tui.errors import EXIT_USAGE, KevinError

PREFIX = "kernelbench:"
SHIPPED = Path(__file__).parent
LEVELS = ("level1", "level2")


class KernelBenchNameError(KevinError):
    """A `kernelbench:` name that names no problem; the message says which names exist."""

    exit_code = EXIT_USAGE


def root() -> Path:
    """Where the problems are read from: `KEVIN_TUI_KERNELBENCH`, else the copy in the package."""
    override = os.environ.get("KEVIN_TUI_KERNELBENCH")
    return Path(override) if override else SHIPPED


def is_name(text: str) -> bool:
    return text.startswith(PREFIX)


def is_shipped(path: Path) -> bool:
    """A problem file inside the package's own copy (never a place to write kernels beside)."""
    return path.resolve().is_relative_to(SHIPPED.resolve())


def level_files(level: str) -> list[Path]:
    """A level's problems in KernelBench's order (by problem number)."""
    directory = root() / level
    if level not in LEVELS or not directory.is_dir():
        raise KernelBenchNameError(f"{PREFIX}{level}: no such level in {root()} (levels: {', '.join(LEVELS)})")
    return sorted(directory.glob("*.py"), key=lambda p: (problem_number(p), p.name))


def problem_number(path: Path) -> int:
    head = path.stem.split("_", 1)[0]
    return int(head) if head.isdigit() else 0


def resolve(name: str) -> list[Path]:
    """The problem files a `kernelbench:` name stands for: one for `level1/19`, a level's for `level2`."""
    rest = name[len(PREFIX) :].strip("/")
    level, _, problem = rest.partition("/")
    files = level_files(level)
    if not problem:
        return files
    wanted = problem.removesuffix(".py")
    found = [p for p in files if p.stem == wanted or (wanted.isdigit() and problem_number(p) == int(wanted))]
    if len(found) != 1:
        near = [p.stem for p in files if wanted.lower() in p.stem.lower()][:5]
        hint = f"; did you mean {', '.join(f'{PREFIX}{level}/{n}' for n in near)}?" if near else ""
        raise KernelBenchNameError(
            f"{name}: no such problem in {root() / level} (use a number, e.g. {PREFIX}{level}/19{hint})"
        )
    return found


def resolve_one(name: str) -> Path:
    """The one problem file a name stands for; a whole level is refused with the way to name one."""
    files = resolve(name)
    if len(files) != 1:
        raise KernelBenchNameError(
            f"{name} names {len(files)} problems; name one, e.g. {name.rstrip('/')}/1 (batch takes a whole level)"
        )
    return files[0]
