"""The Textual app: watch Kevin think, see each kernel build, check and run, and steer.

It renders state and sends intents to the loop's `Agent`; streaming, evaluation and git run in
workers, so typing and scrolling stay smooth. Token bursts are batched: deltas collect in a buffer
that a timer appends to the view 15 times a second.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import (
    Footer,
    Label,
    ListItem,
    ListView,
    Markdown,
    Sparkline,
    Static,
    TabbedContent,
    TabPane,
)
from textual.worker import Worker, WorkerState

from kevin_tui.loop import Agent, Turn
from kevin_tui.models.base import BackendError
from kevin_tui.repo import GitProblem, KernelRepo, NotARepository
from kevin_tui.run import Run, RunError, accept_attempt, open_run
from kevin_tui.session import Session
from kevin_tui.tui.render import diff_renderable, kernel_renderable, verdict_renderable
from kevin_tui.tui.screens import ConfirmScreen, EditScreen, NoteScreen
from kevin_tui.tui.views import TurnView, best_index, view_of, views_of_session

LIVE_TAIL_CHARS = 3000
STEERING = {"continue_turn", "note", "edit", "accept", "undo", "retry", "stop"}


class KevinApp(App):
    CSS_PATH = "kevin.tcss"
    TITLE = "kevin-tui"
    BINDINGS = [  # ids are what `[keys]` in the config file remaps, e.g. continue = "space"
        Binding("c", "continue_turn", "Continue", id="continue"),
        Binding("n", "note", "Note", id="note"),
        Binding("e", "edit", "Edit", id="edit"),
        Binding("a", "accept", "Accept", id="accept"),
        Binding("u", "undo", "Undo", id="undo"),
        Binding("r", "retry", "Retry", id="retry"),
        Binding("s", "stop", "Stop", id="stop"),
        Binding("t", "tab('tab-reasoning')", "Thinking", show=False, id="thinking"),
        Binding("k", "tab('tab-kernel')", "Kernel", show=False, id="kernel"),
        Binding("d", "tab('tab-diff')", "Diff", id="diff"),
        Binding("b", "best", "Best", id="best"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(self, args: argparse.Namespace | None = None, session: Session | None = None) -> None:
        super().__init__()
        self.args = args
        self.replay = session
        self.run_state: Run | None = None
        self.views: list[TurnView] = []
        self.streaming: TurnView | None = None
        self.pending: Turn | None = None
        self.busy = False
        self.closing = asyncio.Event()
        self.buffer: list[str] = []
        self.phase = ""

    # -- layout ----------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Vertical(id="timeline"):
            yield Label("[b]Turns[/b]")
            yield ListView(id="turns")
            yield Sparkline([], id="speedups")
        with Vertical(id="main"):
            with TabbedContent(id="tabs"):
                with TabPane("Reasoning", id="tab-reasoning"), VerticalScroll():
                    yield Static("", id="live")
                    yield Markdown("", id="reasoning")
                with TabPane("Kernel", id="tab-kernel"), VerticalScroll():
                    yield Static("", id="kernel")
                with TabPane("Diff", id="tab-diff"), VerticalScroll():
                    yield Static("", id="diff")
            yield Static("", id="evaluation")
            yield Static("starting…", id="status")
            yield Footer()

    def on_mount(self) -> None:
        if keys := getattr(self.args, "keys", None):
            self.set_keymap(keys)
        self.set_interval(1 / 15, self.flush_stream)
        self.query_one("#turns", ListView).focus()
        if self.replay is not None:
            self.sub_title = f"replay · {self.replay.path.name}"
            self.views = views_of_session(self.replay)
            self.refresh_timeline(select=0)
            self.set_status(f"replay of {self.replay.path.name} · {len(self.views)} turns · read-only")
            if self.replay.warning:
                self.notify(self.replay.warning, severity="warning", timeout=10)
        else:
            self.sub_title = Path(self.args.problem or "").name
            self.drive()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that failed unexpectedly is shown, never a traceback that kills the app."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{event.worker.name} failed: {type(error).__name__}: {error}", severity="error", timeout=30)
            self.busy = False
            self.streaming = None

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        return not (self.replay is not None and action in STEERING)  # replay is read-only

    # -- the run ---------------------------------------------------------------

    @work(exclusive=False, group="run", exit_on_error=False)
    async def drive(self) -> None:
        """Open the run (reference, model, session) after the first frame, start turn 1, stay open."""
        self.set_status("running the reference, starting the model…")
        try:
            async with open_run(self.args, self.model_progress, self.on_agent_event) as run:
                self.run_state = run
                run.evaluator.on_progress = self.evaluation_progress
                for notice in run.notices or []:
                    self.notify(notice, severity="warning", timeout=10)
                self.set_status(self.status_line())
                self.start_turn(None)
                await self.closing.wait()
        except (RunError, BackendError) as exc:
            self.notify(str(exc), severity="error", timeout=30)
            self.set_status(f"error: {exc}")

    @property
    def agent(self) -> Agent:
        assert self.run_state is not None
        return self.run_state.agents[0]

    def model_progress(self, elapsed: float, line: str) -> None:
        self.set_status(f"vLLM starting ({elapsed:.0f} s): {line}")

    def evaluation_progress(self, phase: str, detail: str) -> None:
        """Called from the evaluator's thread."""
        self.call_from_thread(self.show_phase, phase, detail)

    def show_phase(self, phase: str, detail: str) -> None:
        self.phase = phase
        if phase != "done":
            log = self.run_state.evaluator.last_log if self.run_state else None
            tail = _tail(log) if log and phase == "build" else ""
            self.query_one("#evaluation", Static).update(f"[b]{phase}[/b]… {detail}\n{tail}")

    def on_agent_event(self, kind: str, data: dict) -> None:
        if kind == "delta":
            if self.streaming is not None and data.get("candidate", 0) == 0:
                if data["kind"] == "reasoning":
                    self.streaming.reasoning += data["text"]
                else:
                    self.streaming.answer += data["text"]
                self.buffer.append(data["text"])
        elif kind == "prompt":
            self.set_status(self.status_line(tokens=data["tokens"]))
        elif kind == "error":
            self.notify(data["message"], severity="error", timeout=30)

    def flush_stream(self) -> None:
        """While streaming, a bounded tail of the text: constant cost however long the reasoning grows.
        The whole reply is rendered as Markdown once the turn is over."""
        if not self.buffer or self.streaming is None:
            return
        self.buffer.clear()
        reasoning, answer = self.streaming.reasoning, self.streaming.answer
        text = Text(reasoning[-LIVE_TAIL_CHARS:], style="dim")
        if answer:
            text.append("\n\n" + answer[-LIVE_TAIL_CHARS:])
        self.query_one("#live", Static).update(text)

    def start_turn(self, note: str | None, retry: bool = False) -> None:
        if self.busy:
            self.notify("a turn is already running (s to stop it)", severity="warning")
            return
        self.run_turn(note, retry)

    @work(exclusive=True, group="turn", exit_on_error=False)
    async def run_turn(self, note: str | None, retry: bool) -> None:
        self.busy = True
        agent = self.agent
        number = self.pending.number if retry and self.pending else None
        if self.pending is not None and not retry and self.pending.chosen is None and self.pending.candidates:
            agent.choose(self.pending, self.chosen_candidate(self.pending))
        self.streaming = TurnView(number or agent.next_number)
        self.query_one("#live", Static).update("")
        self.query_one("#live", Static).display = True
        self.query_one("#reasoning", Markdown).display = False
        self.query_one(TabbedContent).active = "tab-reasoning"
        self.query_one("#tab-reasoning VerticalScroll", VerticalScroll).anchor()  # follow the stream
        try:
            turn = await agent.run_turn(note, number)
        except BackendError as exc:
            self.notify(f"turn failed: {exc} (the session is kept)", severity="error", timeout=30)
            return
        finally:
            self.busy = False
            self.streaming = None
        self.show_turn(turn)

    def show_turn(self, turn: Turn) -> None:
        self.pending = turn
        if not turn.candidates:
            return
        self.views = [v for v in self.views if v.number != turn.number]  # a retry replaces its rows
        first = len(self.views)
        self.views += [view_of(turn, candidate.index) for candidate in turn.ranked()]
        self.refresh_timeline(select=first)
        if turn.stopped:
            self.notify("generation stopped; what arrived is kept in the session")

    def chosen_candidate(self, turn: Turn) -> int:
        """The candidate the user has selected in the timeline, if it is one of this turn's; else the best."""
        view = self.selected()
        if view is not None and view.number == turn.number:
            return view.candidate
        return turn.ranked()[0].index

    # -- rendering -------------------------------------------------------------

    def refresh_timeline(self, select: int | None = None) -> None:
        turns = self.query_one("#turns", ListView)
        turns.clear()
        best = best_index(self.views)
        for index, view in enumerate(self.views):
            turns.append(ListItem(Label(view.label(index == best))))
        speedups = [v.speedup for v in self.views if v.speedup is not None]
        sparkline = self.query_one("#speedups", Sparkline)
        sparkline.display = len(speedups) > 1  # speedup over turns, once there is a trend to show
        sparkline.data = speedups or [0.0]
        if select is not None and self.views:
            turns.index = select
            self.show_view(self.views[select])

    def on_list_view_highlighted(self, event: ListView.Highlighted) -> None:
        index = event.list_view.index
        if index is not None and 0 <= index < len(self.views):
            with contextlib.suppress(NoMatches):  # a late highlight while the app closes: nothing to show
                self.show_view(self.views[index])

    def selected(self) -> TurnView | None:
        index = self.query_one("#turns", ListView).index
        return self.views[index] if index is not None and 0 <= index < len(self.views) else None

    def show_view(self, view: TurnView) -> None:
        if self.streaming is None:
            reasoning = view.reasoning or "_(no reasoning recorded)_"
            answer = view.answer if view.code is None else (view.summary or "")
            self.query_one("#live", Static).display = False
            markdown = self.query_one("#reasoning", Markdown)
            markdown.display = True
            markdown.update(f"{reasoning}\n\n---\n\n{answer}")
        self.query_one("#kernel", Static).update(kernel_renderable(view.code))
        self.query_one("#evaluation", Static).update(verdict_renderable(view.verdict))
        previous = self.comparison_for(view)
        label = f"turn {previous.number}" if previous else ""
        self.query_one("#diff", Static).update(diff_renderable(previous.code if previous else None, view.code, label))

    def comparison_for(self, view: TurnView) -> TurnView | None:
        """The best earlier kernel if there is one, else the previous one."""
        earlier = [v for v in self.views if v.number < view.number and v.code]
        correct = [v for v in earlier if v.status == "correct"]
        if correct:
            return max(correct, key=lambda v: v.speedup or 0.0)
        return earlier[-1] if earlier else None

    def set_status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    def status_line(self, tokens: int | None = None) -> str:
        run = self.run_state
        if run is None:
            return ""
        budget = self.args.budget
        used = f"prompt {tokens}/{budget} tokens" if tokens is not None else f"budget {budget} tokens"
        env = run.evaluator.environment
        device = env.get("gpu") or env.get("device", "?")
        return f"{run.backend.model} · {run.backend.name} · {device} · {used} · {run.writer.path}"

    # -- intents ---------------------------------------------------------------

    def action_continue_turn(self) -> None:
        self.start_turn(None)

    def action_note(self) -> None:
        def send(note: str | None) -> None:
            if note:
                self.start_turn(note)

        self.push_screen(NoteScreen(), send)

    def action_retry(self) -> None:
        self.start_turn(None, retry=True)

    def action_stop(self) -> None:
        if self.busy and self.run_state is not None:
            self.agent.stop()

    def action_edit(self) -> None:
        view = self.selected()
        if view is None or not view.code or self.busy:
            self.notify("nothing to edit yet", severity="warning")
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if editor and not getattr(self.args, "inline_editor", False):
            self.evaluate_edit(self.edit_in_external_editor(editor, view.code))
        else:
            self.push_screen(EditScreen(view.code), self.evaluate_edit)

    def edit_in_external_editor(self, editor: str, code: str) -> str | None:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(code)
        command = [*shlex.split(editor), f.name]
        try:
            try:
                with self.suspend():
                    subprocess.run(command, check=False)
            except SuspendNotSupported:  # no real terminal (a test driver): a non-interactive editor still works
                subprocess.run(command, check=False, stdin=subprocess.DEVNULL, capture_output=True)
            edited = Path(f.name).read_text()
        finally:
            os.unlink(f.name)
        return edited if edited != code else None

    def evaluate_edit(self, code: str | None) -> None:
        if code:
            self.run_edit(code)

    @work(exclusive=True, group="turn", exit_on_error=False)
    async def run_edit(self, code: str) -> None:
        self.busy = True
        try:
            turn = await self.agent.edit(code)
        finally:
            self.busy = False
        self.show_turn(turn)

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_best(self) -> None:
        best = best_index(self.views)
        if best is None:
            self.notify("no correct kernel yet")
            return
        self.query_one("#turns", ListView).index = best

    def action_help(self) -> None:
        self.action_show_help_panel()

    def action_accept(self) -> None:
        view = self.selected()
        if view is None or view.status != "correct":
            self.notify("only a correct kernel can be accepted", severity="warning")
            return
        self.accept(view, init=False)

    @work(thread=True, group="git", exit_on_error=False)
    def accept(self, view: TurnView, init: bool) -> None:
        attempt = next((a for a in self.agent.attempts if a.number == view.number), None)
        if attempt is None:  # shown but not chosen yet: choose it now
            self.call_from_thread(self.agent.choose, self.pending, view.candidate)
            attempt = self.agent.attempts[-1]
        try:
            message = accept_attempt(self.run_state, attempt, git_init=init)
        except NotARepository as exc:
            self.call_from_thread(self.offer_git_init, view, str(exc))
            return
        except GitProblem as exc:
            self.call_from_thread(self.notify, f"not accepted: {exc} (the kernel is in the session)", severity="error")
            return
        self.call_from_thread(self.notify, message)

    def offer_git_init(self, view: TurnView, why: str) -> None:
        def answer(yes: bool | None) -> None:
            if yes:
                self.accept(view, init=True)

        self.push_screen(ConfirmScreen(f"{why}\n\nCreate a git repository there now?"), answer)

    @work(thread=True, group="git", exit_on_error=False)
    def action_undo(self) -> None:
        try:
            message = KernelRepo.find(self.run_state.problem.path).undo()
        except GitProblem as exc:
            self.call_from_thread(self.notify, f"cannot undo: {exc}", severity="warning")
            return
        self.run_state.writer.write("undo", message=message)
        self.call_from_thread(self.notify, message)

    async def action_quit(self) -> None:
        if self.run_state is not None:
            if self.busy:
                self.agent.stop()
            self.run_state.writer.write("stop", reason="quit")
        self.closing.set()
        self.exit()


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])
