"""Loading a KernelBench-style problem file.

The file is checked statically here (no torch import, no code run) so that a
broken problem is reported before any model or worker is started. Running the
reference happens in the evaluator's reference worker.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kevin_tui.errors import EXIT_USAGE, KevinError

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
ORIGIN_TAG = "# kevin-tui-origin: "  # a problem kevin-tui wrote from your module: where it came from, as JSON


class ProblemError(KevinError):
    """The problem file itself is unusable; the message names the file and the fault."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Problem:
    path: Path
    source: str

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @property
    def origin(self) -> dict[str, Any] | None:
        return problem_origin(self.source)


def problem_origin(source: str) -> dict[str, Any] | None:
    """Where a problem kevin-tui wrote from your module came from (its module, arguments, inputs, and
    the model it was profiled in); None for any other problem file."""
    for line in source.splitlines()[:5]:
        if line.startswith(ORIGIN_TAG):
            try:
                origin = json.loads(line[len(ORIGIN_TAG) :])
            except json.JSONDecodeError:
                return None
            return origin if isinstance(origin, dict) else None
    return None


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at top level (classes, functions, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def parse_problem_source(source: str, path: Path) -> Problem:
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ProblemError(f"{path}: Python syntax error at line {exc.lineno}: {exc.msg}") from None
    missing = [n for n in REQUIRED_NAMES if n not in top_level_names(tree)]
    if missing:
        raise ProblemError(
            f"{path}: not a KernelBench-style problem, missing {', '.join(missing)} "
            "(it needs class Model(nn.Module), get_inputs() and get_init_inputs())"
        )
    return Problem(path=path, source=source)


def load_problem(path: str | Path) -> Problem:
    path = Path(path)
    try:
        source = path.read_text()
    except FileNotFoundError:
        raise ProblemError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{path}: cannot read it ({exc})") from None
    return parse_problem_source(source, path)
