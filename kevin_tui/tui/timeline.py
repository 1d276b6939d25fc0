"""The timeline: one row per candidate of the trajectory on show, which trajectories exist and how
they are doing, and a sparkline of speedups once there is a trend."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Label, ListItem, ListView, Sparkline, Static

from kevin_tui.session import CandidateRef
from kevin_tui.views import CandidateView

GLYPHS = {  # narrow in every common monospace font (emoji widths vary between terminals)
    "correct": "✓", "compiled": "◇", "incorrect": "✗", "rejected": "⊘", "runtime_error": "!",
    "timeout": "◴", "compile_error": "#", "format_error": "?", "pending": "…",
}  # fmt: skip
RUNNING = "⟳"
ACCEPTED = "⇧"
MEANINGS = {  # the legend (help screen)
    "correct": "correct (checked and timed)", "compiled": "built, not judged", "incorrect": "wrong output",
    "rejected": "rejected (a rule of the judge)", "runtime_error": "raised or crashed", "timeout": "too slow to finish",
    "compile_error": "did not build", "format_error": "no kernel in the reply", "pending": "not judged yet",
}  # fmt: skip


def legend() -> str:
    """What the timeline's glyphs mean, one per line."""
    lines = [f"{GLYPHS[status]}  {meaning}" for status, meaning in MEANINGS.items()]
    lines += [
        f"{RUNNING}  running now",
        "*  the best kernel so far",
        "✎  edited by you",
        f"{ACCEPTED}  accepted (committed)",
    ]
    return "\n".join(lines)


def row_label(view: CandidateView, best: bool) -> str:
    speed = f"{view.speedup:5.2f}x" if view.speedup is not None else "      "
    star = "*" if best else " "
    edited = (" ✎" if view.edited else "") + (f" {ACCEPTED}" if view.accepted else "")
    status = view.status.removesuffix("_error")  # compile, format, runtime: the glyph says error
    which = f".{view.ref.candidate + 1}" if view.of > 1 else ""
    return f"{star}{GLYPHS.get(view.status, '·')} {view.number:>3}{which} {speed} {status}{edited}"


@dataclass(frozen=True)
class TrajectoryState:
    """What the trajectory strip says about one trajectory: running, else its best kernel, else how
    its latest turn went."""

    running: bool
    best: CandidateView | None
    latest: CandidateView | None


class Timeline(Vertical):
    HELP = "### The timeline\n\n" + "\n".join(f"- `{line[:1]}` {line[3:]}" for line in legend().splitlines())

    class Selected(Message):
        """The user moved to a row."""

        def __init__(self, view: CandidateView) -> None:
            super().__init__()
            self.view = view

    def __init__(self) -> None:
        super().__init__(id="timeline")
        self.views: list[CandidateView] = []

    def compose(self) -> ComposeResult:
        yield Label("[b]Turns[/b]")
        yield Static("", id="trajectories")
        yield ListView(id="turns")
        yield Sparkline([], id="speedups")

    def on_mount(self) -> None:
        self.query_one("#trajectories", Static).display = False

    def show(
        self,
        views: list[CandidateView],
        best: CandidateRef | None,
        select: int | None = None,
        running: int | None = None,
    ) -> None:
        """The rows, and a last one for the turn `running` while it runs; keeps the row on show
        unless told which to select."""
        turns = self.query_one("#turns", ListView)
        if not turns.is_attached:  # the app is closing
            return
        previous = self.selected()
        self.views = views
        turns.clear()
        turns.extend(ListItem(Label(row_label(v, v.ref == best))) for v in views)
        if running is not None:
            turns.append(ListItem(Label(f" {RUNNING} {running:>3}        running"), disabled=True))
        if select is None and previous is not None:
            select = next((i for i, v in enumerate(views) if v.ref == previous.ref), None)
        speedups = [v.speedup for v in views if v.speedup is not None]
        sparkline = self.query_one("#speedups", Sparkline)
        sparkline.display = len(speedups) > 1  # speedup over turns, once there is a trend to show
        sparkline.data = speedups or [0.0]
        if select is not None and views:
            turns.index = select
            self.post_message(self.Selected(views[select]))

    def show_trajectories(self, states: list[TrajectoryState], current: int) -> None:
        strip = self.query_one("#trajectories", Static)
        strip.display = len(states) > 1
        parts = []
        for index, state in enumerate(states):
            shown = state.best or state.latest
            glyph = RUNNING if state.running else GLYPHS.get(shown.status, "·") if shown else "·"
            speed = f" {state.best.speedup:.2f}x" if state.best and state.best.speedup else ""
            label = f"{index + 1}{glyph}{speed}"
            parts.append(f"[reverse]{label}[/reverse]" if index == current else label)
        strip.update("  ".join(parts))

    def selected(self) -> CandidateView | None:
        index = self.query_one("#turns", ListView).index
        return self.views[index] if index is not None and 0 <= index < len(self.views) else None

    def select_ref(self, ref: CandidateRef) -> None:
        for index, view in enumerate(self.views):
            if view.ref == ref:
                self.query_one("#turns", ListView).index = index
                return

    def on_list_view_highlighted(self, event: ListView.Highlighted) -> None:
        event.stop()
        if (view := self.selected()) is not None:
            self.post_message(self.Selected(view))
