"""`kevin-tui batch` and `kevin-tui batch report`: run, then print and write the report."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from kevin_tui.batch.export import export_rl
from kevin_tui.batch.manifest import MANIFEST
from kevin_tui.batch.plot import MISSING
from kevin_tui.batch.report import RunReport, print_report, write_report
from kevin_tui.batch.results import load_run
from kevin_tui.batch.runner import run_batch
from kevin_tui.config import BatchConfig
from kevin_tui.errors import KevinError


async def run_batch_command(config: BatchConfig) -> int:
    try:
        code, manifest = await run_batch(config)
    except KevinError as exc:
        print(f"kevin-tui: {exc}", file=sys.stderr)
        if (config.out / MANIFEST).exists():
            print(f"kevin-tui: the run is kept: continue it with --resume {config.out}", file=sys.stderr)
        return exc.exit_code
    publish([manifest.directory], manifest.directory / "report", config.export)
    if code:
        print(f"kevin-tui: some trajectories stopped early; continue with --resume {manifest.directory}",
              file=sys.stderr)  # fmt: skip
    return code


def report_command(runs: list[Path], out: Path | None, export: Path | None) -> int:
    try:
        publish(runs, out or default_out(runs), export)
    except KevinError as exc:
        print(f"kevin-tui: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def default_out(runs: list[Path]) -> Path:
    if len(runs) == 1:
        return runs[0] / "report"
    return runs[0] / ("report-vs-" + "-".join(r.resolve().name for r in runs[1:]))


def publish(runs: list[Path], out: Path, export: Path | None) -> None:
    """Print the report of the runs (side by side), write its files, and the RL records if asked."""
    outcomes = [load_run(run) for run in runs]
    for outcome in outcomes:
        for warning in outcome.warnings:
            print(f"kevin-tui: {warning}", file=sys.stderr)
    reports = [RunReport.of(outcome) for outcome in outcomes]
    print_report(reports, Console())
    written = write_report(reports, out)
    print(f"report: {', '.join(str(p) for p in written)}", file=sys.stderr)
    if not any(p.suffix == ".png" for p in written):
        print(f"kevin-tui: {MISSING}", file=sys.stderr)
    if export is not None:
        count = export_rl(runs[0], export)
        print(f"RL records: {count} turns in {export}", file=sys.stderr)
