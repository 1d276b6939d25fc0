"""The evaluation panel: while a kernel is judged, its phase and how long it has taken (with the
build log's tail, and why a first build is slow); afterwards, the verdict."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.widgets import Static

from kevin_tui.driver import Phase
from kevin_tui.evaluator.verdict import Verdict
from kevin_tui.tui.render import verdict_renderable

HINT_AFTER_S = 3.0
LOG_LINES = 6


class EvaluationPanel(Static):
    def __init__(self) -> None:
        super().__init__("", id="evaluation")
        self.phase: Phase | None = None
        self.build_log: Path | None = None
        self.hints: Callable[[], str | None] = lambda: None  # why a build is slow, asked each second
        self.several = False  # trajectories: say whose kernel it is

    def on_mount(self) -> None:
        self.set_interval(1.0, self.tick)

    def show_phase(self, phase: Phase, log: Path | None) -> None:
        self.phase = phase if phase.name != "done" else None
        self.build_log = log
        self.tick()

    def show_verdict(self, verdict: Verdict | None) -> None:
        if self.phase is None:
            self.update(verdict_renderable(verdict))

    def tick(self) -> None:
        """Once a second while a phase runs: its elapsed time."""
        phase = self.phase
        if phase is None:
            return
        elapsed = time.monotonic() - phase.started
        ref = phase.ref
        whose = f"trajectory {ref.trajectory + 1}, " if ref and self.several else ""
        text = Text(f"{whose}turn {ref.turn} · " if ref else "")
        text.append(phase.name, "bold")
        text.append(f"… {elapsed:.0f} s")
        if phase.detail:
            text.append(f"  {phase.detail}")
        if phase.name == "build" and elapsed >= HINT_AFTER_S and (hint := self.hints()):
            text.append(f"  ({hint})", style="italic")
        if phase.name == "build" and self.build_log is not None:
            text.append("\n" + _tail(self.build_log), style="dim")
        self.update(text)


def _tail(path: Path, lines: int = LOG_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])
