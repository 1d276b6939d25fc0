"""`kevin-tui optimize blocks.py:GeluGate --init ... --input ...`: your module as a problem file.

The file goes to `problems/` (beside the project's code, to be committed with its kernel) and is
proven by the worker before it is written: it must compute what your module computes.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kevin_tui.problem import REQUIRED_NAMES, top_level_names
from kevin_tui.usermodel.runner import run_worker
from kevin_tui.usermodel.specs import ModelSpec, SpecError

DEFAULT_PROBLEMS_DIR = Path("problems")


def is_kernelbench(path: Path) -> bool:
    """A file in KernelBench form already (Model, get_inputs, get_init_inputs), read from its syntax tree."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return True  # let the problem loader say what is wrong with it
    return all(name in top_level_names(tree) for name in REQUIRED_NAMES)


def wants_problem(target: str) -> bool:
    """A target that names a module of yours (`FILE.py:Name`, or a file not in KernelBench form)."""
    path, colon, _ = target.rpartition(":") if ":" in target else (target, "", "")
    return bool(colon) or (Path(path).is_file() and not is_kernelbench(Path(path)))


def write_problem(directory: Path, name: str, text: str) -> tuple[Path, str]:
    """Write a problem file; says whether it was new, rewritten or already so."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    before = path.read_text() if path.exists() else None
    if before != text:
        path.write_text(text)
    return path, "wrote" if before is None else "unchanged" if before == text else "rewrote"


def make_problem(
    spec: ModelSpec, device: str, directory: Path = DEFAULT_PROBLEMS_DIR, backward: bool = False
) -> tuple[Path, str]:
    """The problem for a module of yours (or for its backward): written, proven, and said in one line."""
    if not spec.inputs:
        raise SpecError(f"{spec.target}: give the inputs its forward takes, e.g. --input x=float32[8,1024] "
                        "(and --init for its constructor)")  # fmt: skip
    request = {**spec.request(), "device": device, "root": str(Path.cwd()), "problems_dir": str(directory.resolve()),
               "backward": backward}  # fmt: skip
    answer = run_worker("problem", request)
    path, done = write_problem(directory, answer["file_name"], answer["text"])
    return path, f"{done} {path} ({answer['class']} from {spec.describe()})"
