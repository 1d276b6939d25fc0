"""The evaluation panel: while a kernel is judged, its phase and how long it has taken (with the
builder's log as it is written, its stages stamped with seconds, and why a first build is slow);
below it, the selected candidate's own verdict.

Every phase ends: the driver's `done`, the end of the turn that started it (a reply without a
kernel, a stopped turn), the run being ready (the reference ran), or the run failing to open. The
panel scrolls, and can be maximised (the app's `v`), so a long verdict is all readable.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from kevin_tui.driver import Phase
from kevin_tui.evaluator.compiler_output import printable
from kevin_tui.evaluator.host.scratch import read_plain
from kevin_tui.evaluator.verdict import Verdict
from kevin_tui.tui.render import verdict_renderable

HINT_AFTER_S = 3.0
LOG_LINES = 6
TAIL_BYTES = 16384  # of the log read each second
LINE_CHARS = 300


class EvaluationPanel(VerticalScroll):
    ALLOW_MAXIMIZE = True

    def __init__(self) -> None:
        super().__init__(id="evaluation")
        self.phase: Phase | None = None
        self.build_log: Callable[[], Path | None] = lambda: None  # the builder's log, read each second
        self.hints: Callable[[], str | None] = lambda: None  # why a build is slow, asked each second
        self.several = False  # trajectories: say whose kernel it is
        self.verdict: Verdict | None = None
        self.whose = ""  # the selected candidate, named above its verdict while a phase is shown
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="evaluation-text")

    def on_mount(self) -> None:
        self.set_interval(1.0, self.tick)

    def show_phase(self, phase: Phase) -> None:
        self.phase = phase if phase.name != "done" else None
        self.redraw()

    def end_phase(self, trajectory: int | None = None) -> None:
        """The work behind the phase is over (a turn of `trajectory` ended; None: whatever ran)."""
        phase = self.phase
        if phase is not None and (trajectory is None or phase.ref is None or phase.ref.trajectory == trajectory):
            self.phase = None
            self.redraw()

    def show_error(self, message: str) -> None:
        self.phase, self.error = None, message
        self.redraw()

    def show_verdict(self, verdict: Verdict | None, whose: str = "") -> None:
        self.verdict, self.whose = verdict, whose
        self.redraw()

    def tick(self) -> None:
        """Once a second while a phase runs: its elapsed time."""
        if self.phase is not None:
            self.redraw()

    def redraw(self) -> None:
        self.query_one("#evaluation-text", Static).update(self.content())

    def content(self) -> RenderableType:
        """The phase (if one runs) or the error, then the selected candidate's verdict."""
        parts: list[RenderableType] = []
        if self.error is not None:
            parts.append(Text(self.error, style="bold red"))
        if self.phase is not None:
            parts.append(self.phase_text(self.phase))
            if self.verdict is not None:
                parts.append(Text(f"\n{self.whose}:" if self.whose else "", style="dim"))
        if self.verdict is not None or (self.phase is None and self.error is None):
            parts.append(verdict_renderable(self.verdict))
        return Group(*parts)

    def phase_text(self, phase: Phase) -> Text:
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
        if phase.name == "build" and (log := self.build_log()) is not None:
            text.append("\n" + _tail(log), style="dim")
        return text

    def text(self) -> str:
        """What the panel says, as plain text (tests, and copying)."""
        out = io.StringIO()
        Console(width=max(self.content_size.width, 40), color_system=None, file=out).print(self.content())
        return out.getvalue()


def _tail(path: Path, lines: int = LOG_LINES) -> str:
    """The log's last lines. The builder's log holds the compiler's output on the candidate's sources:
    read boundedly, control characters (terminal escapes) dropped, and shown as plain text, never markup."""
    text = read_plain(path, TAIL_BYTES, tail=True).decode(errors="replace")  # the worker could make its log a link
    kept = [printable(line)[:LINE_CHARS] for line in text.strip().splitlines()[-lines:]]
    return "\n".join(kept)
