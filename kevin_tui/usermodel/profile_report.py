"""`kevin-tui profile`: the worker's profile of your model as rows to read, rank and pick from.

Modules (your classes, grouped by how they were built and called) are ranked by self time; each
says its share of the model's time and the most the whole model could gain if it took no time at
all (Amdahl: 1 / (1 - share)), and carries a proven problem file, ready for `kevin-tui optimize`.
Operators are torch's, by self time, with their input shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from kevin_tui.usermodel.problems import DEFAULT_PROBLEMS_DIR, write_problem
from kevin_tui.usermodel.runner import run_worker
from kevin_tui.usermodel.specs import ModelSpec, SpecError


def max_gain(share: float) -> float | None:
    """The whole model's speedup if this part took no time (None: it is the whole model)."""
    return 1 / (1 - share) if share < 0.995 else None


def gain_text(share: float) -> str:
    gain = max_gain(share)
    return f"{gain:.2f}x" if gain is not None else "all"


@dataclass(frozen=True)
class ModuleRow:
    rank: int
    name: str
    paths: list[str]
    calls: float
    self_ms: float
    total_ms: float
    self_share: float
    share: float
    inputs: list[str]
    init: dict[str, str]
    file_name: str | None
    problem: str | None
    why_not: str | None
    backward_ms: float | None = None  # with --backward: its backward alone, and its backward problem
    backward_file_name: str | None = None
    backward_problem: str | None = None
    backward_why_not: str | None = None

    @property
    def where(self) -> str:
        more = f" +{len(self.paths) - 1}" if len(self.paths) > 1 else ""
        return f"{self.paths[0]}{more}"


@dataclass(frozen=True)
class OperatorRow:
    name: str
    calls: float
    self_ms: float
    share: float
    shapes: list[list[int]]


@dataclass(frozen=True)
class ProfileReport:
    spec: ModelSpec
    device: str
    gpu: str | None
    total_ms: float
    plain_ms: float
    profiled_ms: float
    calls: int
    seconds: float
    modules: list[ModuleRow]
    operators: list[OperatorRow]

    @classmethod
    def from_answer(cls, spec: ModelSpec, answer: dict[str, Any]) -> ProfileReport:
        names = [f.name for f in fields(ModuleRow) if f.name not in ("rank", "name")]
        modules = [
            ModuleRow(rank=rank, name=row["class"], **{n: row[n] for n in names})
            for rank, row in enumerate(answer["modules"], 1)
        ]
        operators = [OperatorRow(**row) for row in answer["operators"]]
        timing = answer["timing"]
        return cls(
            spec, answer["device"], answer["gpu"], answer["total_ms"], timing["plain_ms"], timing["profiled_ms"],
            answer["calls"], answer["seconds"], modules, operators,
        )  # fmt: skip

    @property
    def overhead(self) -> float:
        return self.profiled_ms / self.plain_ms - 1 if self.plain_ms else 0.0

    def summary(self) -> str:
        clock = "kernel time" if self.device.startswith("cuda") else "CPU time"
        return (f"{self.spec.describe()} on {self.gpu or self.device}: {self.total_ms:.3f} ms of {clock} per call "
                f"({self.calls} profiled calls); plain calls {self.plain_ms:.3f} ms, under the profiler "
                f"{self.profiled_ms:.3f} ms ({self.overhead:+.0%} overhead)")  # fmt: skip

    def pick(self, picks: list[str]) -> list[ModuleRow]:
        """Rows by rank (`1`) or class name (`GeluGate`); several in one string with commas."""
        chosen = []
        for pick in (p.strip() for text in picks for p in text.split(",") if p.strip()):
            found = [r for r in self.modules if (pick.isdigit() and r.rank == int(pick)) or r.name == pick]
            if not found:
                names = ", ".join(f"{r.rank} {r.name}" for r in self.modules)
                raise SpecError(f"--extract {pick}: no such row (the modules are: {names})")
            chosen += [r for r in found if r not in chosen]
        return chosen


def profile(
    spec: ModelSpec, device: str, calls: int, directory: Path = DEFAULT_PROBLEMS_DIR, backward: bool = False
) -> ProfileReport:
    """`backward`: also each module's backward, timed alone, and its backward problem."""
    request = {**spec.request(), "device": device, "calls": calls, "root": str(Path.cwd()),
               "problems_dir": str(directory.resolve()), "backward": backward}  # fmt: skip
    return ProfileReport.from_answer(spec, run_worker("profile", request))


def extract(rows: list[ModuleRow], directory: Path = DEFAULT_PROBLEMS_DIR) -> list[str]:
    """Write each row's problem; one line per row saying what was done (or why it cannot be)."""
    lines = []
    for row in rows:
        if row.problem is None or row.file_name is None:
            lines.append(f"{row.rank} {row.name}: no problem: {row.why_not}")
            continue
        path, done = write_problem(directory, row.file_name, row.problem)
        lines.append(f"{row.rank} {row.name}: {done} {path}; next: kevin-tui optimize {path}")
        if row.backward_problem is not None and row.backward_file_name is not None:
            path, done = write_problem(directory, row.backward_file_name, row.backward_problem)
            lines.append(f"{row.rank} {row.name} backward: {done} {path}; next: kevin-tui optimize {path}")
        elif row.backward_why_not is not None:
            lines.append(f"{row.rank} {row.name} backward: no problem: {row.backward_why_not}")
    return lines


MODULE_COLUMNS = ("#", "module", "where", "calls", "self ms", "self", "total", "max gain", "inputs")
OPERATOR_COLUMNS = ("operator", "calls", "self ms", "share", "max gain", "input shapes")
RIGHT = {"#", "calls", "self ms", "self", "total", "share", "max gain"}


def _ms(value: float) -> str:
    return f"{value:.3f}" if value < 100 else f"{value:.1f}"


def module_cells(row: ModuleRow) -> list[str]:
    inputs = " ".join(row.inputs) if row.problem else f"(no problem: {row.why_not})"
    return [str(row.rank), row.name, row.where, f"{row.calls:.0f}", _ms(row.self_ms), f"{row.self_share:.1%}",
            f"{row.share:.1%}", gain_text(row.share), inputs]  # fmt: skip


def operator_cells(row: OperatorRow) -> list[str]:
    shapes = ", ".join(str(s) for s in row.shapes)
    return [row.name, f"{row.calls:.0f}", _ms(row.self_ms), f"{row.share:.1%}", gain_text(row.share), shapes]


def _table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]

    def line(cells: list[str] | tuple[str, ...]) -> str:
        parts = [c.rjust(w) if name in RIGHT else c.ljust(w) for c, w, name in zip(cells, widths, columns, strict=True)]
        return "  ".join(parts).rstrip()

    head = line(columns)
    return [head, "-" * len(head), *(line(r) for r in rows)]


def backward_lines(rows: list[ModuleRow]) -> list[str]:
    """With --backward: each module's backward, timed alone, beside its time in the forward."""
    measured = [r for r in rows if r.backward_ms is not None]
    if not measured:
        return []
    lines = [f"{r.rank} {r.name}: backward {_ms(r.backward_ms or 0.0)} ms alone (forward {_ms(r.total_ms)} ms in "
             "the model)" + (f"; no backward problem: {r.backward_why_not}" if r.backward_why_not else "")
             for r in measured]  # fmt: skip
    return ["Backward of your modules, each alone (--backward; `--extract` writes its backward problem too):",
            *lines, ""]  # fmt: skip


def render(report: ProfileReport) -> str:
    """The tables as text: modules, then operators."""
    return "\n".join([
        report.summary(),
        "",
        "Your modules, by self time (time in torch's own layers inside them counts as theirs):",
        *_table(MODULE_COLUMNS, [module_cells(r) for r in report.modules]),
        "",
        *backward_lines(report.modules),
        "Operators, by self time:",
        *_table(OPERATOR_COLUMNS, [operator_cells(o) for o in report.operators]),
        "",
        "max gain: the whole model's speedup if that part took no time (Amdahl). "
        "`--extract 1` (or a class name) writes its problem file.",
    ])  # fmt: skip
