"""The batch report: Kevin's Table 1 for a run (or two side by side), its problems, and the curve of
the best speedup by turn; printed with Rich and written as Markdown, CSV and JSON (and a PNG plot,
kevin_tui.batch.plot).

Every table is built once as rows of text (`Table`) and rendered to each format from those rows.
The figures' definitions are kevin_tui.batch.metrics'.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from kevin_tui.batch.metrics import FAST_P, Figures, ProblemFigures, best_by_turn, summarise
from kevin_tui.batch.results import ProblemOutcome, RunOutcome

BAR = 24  # characters of the widest bar in the terminal curve


@dataclass(frozen=True)
class RunReport:
    outcome: RunOutcome
    overall: dict[str, Figures]  # "best" and "avg"
    problems: tuple[tuple[ProblemOutcome, ProblemFigures], ...]
    curve: dict[str, list[float]]

    @classmethod
    def of(cls, outcome: RunOutcome) -> RunReport:
        judged = outcome.judged
        trajectories = [list(p.trajectories) for p in judged]
        return cls(
            outcome,
            summarise(trajectories, outcome.compile_timed),
            tuple((p, ProblemFigures.of(p.trajectories)) for p in outcome.problems),
            best_by_turn(trajectories, outcome.turns),
        )

    @property
    def k(self) -> int:
        return self.outcome.trajectories

    @property
    def skipped(self) -> list[ProblemOutcome]:
        return [p for p in self.outcome.problems if p.state == "skipped"]


@dataclass(frozen=True)
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]


def percent(share: float) -> str:
    return f"{100 * share:.1f}%"


def times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def overall_table(reports: Sequence[RunReport]) -> Table:
    """Kevin's Table 1: correctness, mean and geometric-mean speedup, fast_p; best@k and avg@k."""
    headers = ["metric"]
    for report in reports:
        name = f"{report.outcome.name} " if len(reports) > 1 else ""
        headers += [f"{name}best@{report.k}", f"{name}avg@{report.k}"]
    lines: list[tuple[str, Any]] = [
        ("correctness", lambda f: percent(f.correctness)),
        ("mean speedup vs eager", lambda f: times(f.mean_speedup)),
        ("geometric-mean speedup vs eager (correct only)", lambda f: times(f.geomean_speedup)),
        ("mean speedup vs torch.compile", lambda f: times(f.mean_speedup_compile)),
        ("geometric-mean speedup vs torch.compile (correct only)", lambda f: times(f.geomean_speedup_compile)),
        *((f"fast_{p:g} (correct and > {p:g}x eager)", lambda f, p=p: percent(f.fast[p])) for p in FAST_P),
    ]
    rows = [[label] + [show(r.overall[c]) for r in reports for c in ("best", "avg")] for label, show in lines]
    counts = ["problems judged (skipped)"]
    for report in reports:
        counts += [f"{len(report.outcome.judged)} ({len(report.skipped)})", ""]
    return Table("Overall", headers, [counts, *rows])


def problem_table(reports: Sequence[RunReport]) -> Table:
    """Per problem: correct trajectories, best and mean trajectory speedup (and vs torch.compile)."""
    headers = ["problem"]
    for report in reports:
        name = f"{report.outcome.name} " if len(reports) > 1 else ""
        headers += [f"{name}correct", f"{name}best", f"{name}mean", f"{name}best vs compile"]
    keys = list(dict.fromkeys(p.key for r in reports for p in r.outcome.problems))
    rows = []
    for key in keys:
        row = [key]
        for report in reports:
            row += _problem_cells(report, key)
        rows.append(row)
    return Table("Problems", headers, rows)


def _problem_cells(report: RunReport, key: str) -> list[str]:
    found = next(((p, f) for p, f in report.problems if p.key == key), None)
    if found is None:
        return ["-", "", "", ""]
    problem, figures = found
    if problem.state == "skipped" and not figures.trajectories:
        return ["skipped", "", "", ""]
    if not figures.trajectories:
        return [problem.state, "", "", ""]
    compile_best = times(figures.best_speedup_compile) if report.outcome.compile_timed else "n/a"
    return [f"{figures.correct}/{figures.trajectories}", times(figures.best_speedup), times(figures.avg_speedup),
            compile_best]  # fmt: skip


def curve_table(reports: Sequence[RunReport]) -> Table:
    """The best speedup so far after each turn, mean over problems (best@k and avg@k)."""
    headers = ["turn"]
    for report in reports:
        name = f"{report.outcome.name} " if len(reports) > 1 else ""
        headers += [f"{name}best@{report.k}", f"{name}avg@{report.k}"]
    turns = max(r.outcome.turns for r in reports)
    rows = []
    for turn in range(turns):
        row = [str(turn + 1)]
        for report in reports:
            for column in ("best", "avg"):
                values = report.curve[column]
                row.append(times(values[turn]) if turn < len(values) else "")
        rows.append(row)
    return Table("Best speedup by turn (mean over problems)", headers, rows)


def skipped_table(reports: Sequence[RunReport]) -> Table:
    """Problems skipped because their reference could not run (or their file changed), and why."""
    rows = [[report.outcome.name, p.key, p.reason.splitlines()[0] if p.reason else ""]
            for report in reports for p in report.skipped]  # fmt: skip
    return Table("Skipped problems", ["run", "problem", "why"], rows)


def tables(reports: Sequence[RunReport]) -> list[Table]:
    found = [overall_table(reports), problem_table(reports), curve_table(reports)]
    skipped = skipped_table(reports)
    return [*found, skipped] if skipped.rows else found


# -- formats ---------------------------------------------------------------------------


def markdown(reports: Sequence[RunReport]) -> str:
    lines = [f"# Batch report: {' vs '.join(r.outcome.name for r in reports)}", ""]
    for report in reports:
        protocol = report.outcome.manifest.protocol
        lines.append(f"- {report.outcome.name}: model {report.outcome.model}, {protocol['trajectories']} trajectories"
                     f" x {protocol['turns']} turns, {len(report.outcome.problems)} problems")  # fmt: skip
    for table in tables(reports):
        lines += ["", f"## {table.title}", "", "| " + " | ".join(table.headers) + " |",
                  "|" + "|".join(" --- " for _ in table.headers) + "|"]  # fmt: skip
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def csv_text(reports: Sequence[RunReport]) -> str:
    """One row per run and problem (and one `ALL` row per run), plain numbers for spreadsheets."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["run", "problem", "state", "trajectories", "correct_trajectories", "best_correct",
                     "best_speedup", "mean_speedup", "best_speedup_compile", "mean_speedup_compile"])  # fmt: skip
    for report in reports:
        for problem, figures in report.problems:
            writer.writerow([report.outcome.name, problem.key, problem.state, figures.trajectories, figures.correct,
                             int(figures.best_correct), figures.best_speedup, figures.avg_speedup,
                             figures.best_speedup_compile, figures.avg_speedup_compile])  # fmt: skip
        best, avg = report.overall["best"], report.overall["avg"]
        writer.writerow([report.outcome.name, "ALL", "", report.k, "", best.correctness, best.mean_speedup,
                         avg.mean_speedup, best.mean_speedup_compile, avg.mean_speedup_compile])  # fmt: skip
    return out.getvalue()


def json_data(reports: Sequence[RunReport]) -> dict[str, Any]:
    runs = []
    for report in reports:
        outcome = report.outcome
        runs.append({
            "directory": str(outcome.directory), "name": outcome.name, "model": outcome.model,
            "protocol": outcome.manifest.protocol,
            "overall": {column: asdict(figures) for column, figures in report.overall.items()},
            "problems": [{"problem": p.key, "path": p.path, "state": p.state, "reason": p.reason,
                          "finished_trajectories": p.finished, **asdict(f)} for p, f in report.problems],
            "best_speedup_by_turn": report.curve,
            "warnings": list(outcome.warnings),
        })  # fmt: skip
    return {"definitions": "kevin_tui.batch.metrics; README section Batch", "runs": runs}


def print_report(reports: Sequence[RunReport], console: Console) -> None:
    for table in tables(reports):
        rich = RichTable(title=table.title, title_justify="left")
        for index, header in enumerate(table.headers):
            rich.add_column(header, justify="left" if index == 0 else "right")
        for row in table.rows:
            rich.add_row(*row)
        console.print(rich)
    console.print(terminal_curve(reports))


def terminal_curve(reports: Sequence[RunReport]) -> str:
    """The best@k curve as bars, one line per turn and run."""
    top = max((v for r in reports for v in r.curve["best"]), default=0.0) or 1.0
    lines = ["best@k speedup by turn:"]
    for report in reports:
        for turn, value in enumerate(report.curve["best"], start=1):
            name = f"{report.outcome.name} " if len(reports) > 1 else ""
            lines.append(f"  {name}turn {turn:>2} {'█' * round(BAR * value / top):<{BAR}} {value:.2f}x")
    return "\n".join(lines)


def write_report(reports: Sequence[RunReport], directory: Path) -> list[Path]:
    """report.md, report.csv, report.json and (with matplotlib) speedup_by_turn.png in `directory`."""
    from kevin_tui.batch.plot import plot_curves

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (("report.md", markdown(reports)), ("report.csv", csv_text(reports)),
                       ("report.json", json.dumps(json_data(reports), indent=1) + "\n")):  # fmt: skip
        path = directory / name
        path.write_text(text)
        written.append(path)
    png = plot_curves(reports, directory / "speedup_by_turn.png")
    if png is not None:
        written.append(png)
    return written
