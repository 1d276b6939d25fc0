"""What a batch run has done so far, shown live on a terminal (Rich) or as a line every so often.

The runner tells it what happens (problems opened, done, skipped; the drivers' reports of each
trajectory); it keeps the counts and renders them. Nothing here decides anything.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kevin_tui.driver import Judged, Notice, PromptBuilt, Replied, Report

BEST_SHOWN = 5


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


@dataclass
class Progress:
    problems: int
    trajectories: int
    turns: int
    console: Console = field(default_factory=lambda: Console(stderr=True))
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    skipped: int = 0
    running: dict[str, str] = field(default_factory=dict)  # problem -> evaluation device
    kernels: int = 0  # judged, in this run's lifetime (resumed ones included)
    kernels_now: int = 0  # judged since this process started
    correct: int = 0
    best: dict[str, float] = field(default_factory=dict)
    generating: int = 0
    tokens: int = 0
    model_line: str = ""

    # -- what happens ------------------------------------------------------------

    def resumed(self, kernels: int, correct: int, best: dict[str, float], done: int) -> None:
        """What the run's earlier processes did."""
        self.kernels, self.correct, self.done = kernels, correct, done
        self.best.update(best)

    def opened(self, problem: str, device: str) -> None:
        self.running[problem] = device

    def finished(self, problem: str) -> None:
        self.running.pop(problem, None)
        self.done += 1
        self.say(f"{problem}: done{self._best_of(problem)}")

    def skip(self, problem: str, reason: str) -> None:
        self.running.pop(problem, None)
        self.skipped += 1
        self.say(f"{problem}: skipped: {reason}", "yellow")

    def on_report(self, problem: str, report: Report) -> None:
        if isinstance(report, PromptBuilt):
            self.generating += 1
        elif isinstance(report, Replied):
            self.generating = max(0, self.generating - 1)
            self.tokens += report.tokens
        elif isinstance(report, Judged):
            self.kernels += 1
            self.kernels_now += 1
            if report.status == "correct":
                self.correct += 1
                speedup = report.speedup or 0.0
                self.best[problem] = max(self.best.get(problem, 0.0), speedup)
        elif isinstance(report, Notice):
            self.say(f"{problem}: {report.message}", "red" if report.severity == "error" else "yellow")

    def on_model(self, elapsed_s: float, line: str) -> None:
        """A managed model server's start, line by line."""
        self.model_line = f"model starting ({elapsed_s:.0f} s): {line}"

    def say(self, message: str, style: str = "") -> None:
        self.console.print(Text(message, style=style))

    # -- figures -----------------------------------------------------------------

    @property
    def total_kernels(self) -> int:
        return (self.problems - self.skipped) * self.trajectories * self.turns

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def eta(self) -> str:
        if not self.kernels_now:
            return "?"
        remaining = max(0, self.total_kernels - self.kernels)
        return duration(remaining * self.elapsed / self.kernels_now)

    def _best_of(self, problem: str) -> str:
        return f", best {self.best[problem]:.2f}x" if problem in self.best else ", no correct kernel"

    def line(self) -> str:
        best = sorted(self.best.items(), key=lambda item: -item[1])[:BEST_SHOWN]
        shown = ", ".join(f"{name} {speedup:.2f}x" for name, speedup in best) or "-"
        return (
            f"[{duration(self.elapsed)}] problems {self.done}/{self.problems} done ({self.skipped} skipped, "
            f"{len(self.running)} open) · kernels {self.kernels}/{self.total_kernels} judged, {self.correct} correct"
            f" · generating {self.generating} · {self.tokens / max(self.elapsed, 1e-9):.0f} tok/s"
            f" · ETA {self.eta()} · best: {shown}"
        )

    def render(self) -> Group:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        table.add_row("problems", f"{self.done}/{self.problems} done, {self.skipped} skipped, "
                      f"{len(self.running)} open ({', '.join(sorted(self.running)) or '-'})")  # fmt: skip
        table.add_row("kernels", f"{self.kernels}/{self.total_kernels} judged, {self.correct} correct")
        table.add_row("generating", f"{self.generating} replies, {self.tokens / max(self.elapsed, 1e-9):.0f} tokens/s")
        table.add_row("elapsed", f"{duration(self.elapsed)}, ETA {self.eta()}")
        best = sorted(self.best.items(), key=lambda item: -item[1])[:BEST_SHOWN]
        table.add_row("best", "  ".join(f"{name} {speedup:.2f}x" for name, speedup in best) or "-")
        if self.model_line:
            table.add_row("model", self.model_line)
        return Group(Text("kevin-tui batch", style="bold"), table)

    # -- showing it --------------------------------------------------------------

    @asynccontextmanager
    async def shown(self, live: bool | None, every: float) -> AsyncIterator[None]:
        """Live on a terminal; otherwise one line every `every` seconds (and a last one at the end)."""
        if live if live is not None else sys.stderr.isatty():
            with Live(get_renderable=self.render, console=self.console, refresh_per_second=2, transient=False):
                yield
            return
        task = asyncio.create_task(self._lines(every))
        try:
            yield
        finally:
            task.cancel()
            self.say(self.line())

    async def _lines(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            self.say(self.line())
