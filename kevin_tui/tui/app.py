"""The Textual app: watch Kevin think, see each kernel build, check and run, and steer.

It renders what the driver reports and sends it the user's intents; it decides nothing about the
run. The driver's work runs as asyncio tasks and threads that only report; reports reach the app as
messages (posting is thread-safe). Streaming text is not pushed token by token: 15 times a second
a timer shows what fits of the reply's end (LiveTail), so the cost does not grow with the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from textual import on, work
from textual.app import App, ComposeResult, SuspendNotSupported, SystemCommand
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Markdown, Static, TabbedContent, TabPane
from textual.worker import Worker, WorkerCancelled, WorkerFailed, WorkerState

from kevin_tui.config import RunConfig
from kevin_tui.driver import (
    Driver,
    Evidenced,
    ModelStarting,
    Notice,
    Phase,
    PromptBuilt,
    Ready,
    Replied,
    Report,
    TurnEnded,
    TurnStarted,
)
from kevin_tui.errors import KevinError
from kevin_tui.evaluator import Evaluator
from kevin_tui.headless import action_line, action_records
from kevin_tui.judge import JudgeFactory
from kevin_tui.models.base import Reply
from kevin_tui.protocol.notes import profile_note
from kevin_tui.session import CandidateRef, Session
from kevin_tui.tui.evaluation_panel import EvaluationPanel
from kevin_tui.tui.live_tail import LiveTail
from kevin_tui.tui.render import diff_renderable, kernel_renderable, profile_renderable
from kevin_tui.tui.screens import ConfirmScreen, EditScreen, NoteScreen
from kevin_tui.tui.timeline import Timeline, TrajectoryState
from kevin_tui.views import CandidateView, best_view, diff_base, views_of_session

STREAM_FPS = 15
TABS = {f"tab('tab-{tab}')": f"the {tab} tab" for tab in ("reasoning", "kernel", "diff", "profile")}
STEERING = {"continue_turn", "continue_all", "note", "edit", "accept", "undo", "retry", "stop"}
SEVERAL = {"continue_all", "next_trajectory", "previous_trajectory"}


class DriverReport(Message):
    def __init__(self, report: Report) -> None:
        super().__init__()
        self.report = report


class KevinApp(App):
    CSS_PATH = "kevin.tcss"
    TITLE = "kevin-tui"
    BINDINGS = [  # ids are what `[keys]` in the config file remaps, e.g. continue = "space"
        Binding("c", "continue_turn", "Continue", id="continue"),
        Binding("C", "continue_all", "All", id="continue-all"),
        Binding("n", "note", "Note", id="note"),
        Binding("e", "edit", "Edit", id="edit"),
        Binding("a", "accept", "Accept", id="accept"),
        Binding("u", "undo", "Undo", id="undo"),
        Binding("r", "retry", "Retry", id="retry"),
        Binding("s", "stop", "Stop", id="stop"),
        Binding("]", "next_trajectory", "Trajectory", id="next-trajectory"),
        Binding("[", "previous_trajectory", "Previous trajectory", show=False, id="previous-trajectory"),
        Binding("t", "tab('tab-reasoning')", "Thinking", id="thinking"),
        Binding("k", "tab('tab-kernel')", "Kernel", id="kernel"),
        Binding("d", "tab('tab-diff')", "Diff", id="diff"),
        Binding("p", "tab('tab-profile')", "Profile", id="profile"),
        Binding("P", "profile_note", "Profile as the next note", show=False, id="profile-note"),
        Binding("b", "best", "Best", id="best"),
        Binding("v", "verdict", "Verdict", id="verdict"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("escape", "close_help", "Close help", show=False, id="close-help"),
        Binding("q", "quit", "Quit", id="quit"),
    ]
    ACTION_HELP = {  # the command palette's second line, per action
        "continue_turn": "start the next turn from the selected kernel", "continue_all": "every trajectory's next turn",
        "note": "a note for Kevin's next turn", "edit": "edit the selected kernel; your edit is judged as a turn",
        "accept": "commit the selected correct kernel beside the problem", "undo": "take back the last accept",
        "retry": "sample the latest turn again", "stop": "stop the running turn (what arrived is kept)",
        "next_trajectory": "show the next trajectory", "previous_trajectory": "show the previous trajectory",
        "profile_note": "send where the kernel's time goes as the next turn's note",
        "best": "select the best kernel so far", "verdict": "the verdict panel full screen (again: back)",
        "help": "keys, and what the timeline's marks mean", "quit": "stop the turn, save the session, and exit",
    }  # fmt: skip

    def __init__(
        self,
        config: RunConfig | None = None,
        session: Session | None = None,
        title: str = "",
        judge: JudgeFactory = Evaluator,
    ) -> None:
        super().__init__()
        self.config = config or RunConfig()
        self.judge = judge
        self.replay = session
        self.label = title
        self.driver: Driver | None = None
        self.trajectory = 0  # the one on show
        self.closing = asyncio.Event()
        self.running: dict[int, int] = {}  # trajectory: the turn it runs
        self.shown_chars = -1
        self.tokens: int | None = None
        self.shown: CandidateView | None = None
        self.session_path: Path | None = None  # where the session is, printed on quitting
        self.streaming: tuple[int, Reply] | None = None  # (trajectory, reply) the live tail shows

    # -- layout ----------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Timeline()
        with Vertical(id="main"):
            with TabbedContent(id="tabs"):
                with TabPane("Reasoning", id="tab-reasoning"):
                    yield LiveTail(id="live")
                    with VerticalScroll(id="reply"):
                        yield Markdown("", id="reasoning")
                with TabPane("Kernel", id="tab-kernel"), VerticalScroll():
                    yield Static("", id="kernel")
                with TabPane("Diff", id="tab-diff"), VerticalScroll():
                    yield Static("", id="diff")
                with TabPane("Profile", id="tab-profile"), VerticalScroll():
                    yield Static("", id="profile")
            yield EvaluationPanel()
        with Vertical(id="bottom"):  # docked below both columns: the whole width
            yield Static("starting…", id="status")
            yield Footer()

    def on_mount(self) -> None:
        if self.config.keys:
            self.set_keymap(self.config.keys)
        self.query_one("#turns").focus()
        if self.replay is not None:
            self.sub_title = f"replay · {self.replay.path.name}"
            self.show_trajectory(0)
            self.set_status(f"replay of {self.replay.path.name} · {self.turn_count()} turns · read-only")
            if self.replay.warning:
                self.notify(self.replay.warning, severity="warning", timeout=10)
            for action in action_records(self.replay):  # accepts, applies, undos: the rows mark accepts
                self.notify(action_line(action), timeout=15)
            return
        problem = self.config.problem.problem
        self.sub_title = " · ".join(x for x in (self.label, problem.name if problem else "resume") if x)
        self.set_interval(1 / STREAM_FPS, self.show_stream)
        self.set_status("running the reference, starting the model…")
        self.call_after_refresh(self.drive)  # the first frame is painted before anything starts

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that failed unexpectedly is shown, never a traceback that kills the app."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{event.worker.name} failed: {type(error).__name__}: {error}", severity="error", timeout=30)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "close_help":
            return bool(self.screen.query("HelpPanel"))
        if self.replay is not None and action in STEERING:
            return False  # replay is read-only
        if action in SEVERAL:
            return self.trajectories() > 1
        return True

    # -- the run -----------------------------------------------------------------

    @work(group="run", exit_on_error=False)
    async def drive(self) -> None:
        """Open the run after the first frame (the reference runs in a thread), start every
        trajectory's first turn (a resumed session waits for the user), and stay open until the
        app quits."""
        try:
            async with Driver.open(self.config, self.post_report, self.judge) as driver:
                self.driver = driver
                self.session_path = driver.session_path
                panel = self.query_one(EvaluationPanel)
                panel.hints, panel.build_log, panel.several = (
                    driver.build_hint,
                    driver.build_log,
                    driver.trajectories > 1,
                )
                self.show_trajectory(0)
                if self.config.problem.resume:
                    self.notify("session resumed: select the candidate to go on from, then c continues")
                else:
                    driver.continue_()
                await self.closing.wait()
        except KevinError as exc:
            if self.closing.is_set():
                return
            self.notify(str(exc), severity="error", timeout=30)
            self.query_one(EvaluationPanel).show_error(f"The run could not start: {exc}")
            self.set_status(f"error: {exc}")

    def post_report(self, report: Report) -> None:
        """The driver's reporter; called from its tasks and from evaluator threads."""
        self.post_message(DriverReport(report))

    def on_driver_report(self, message: DriverReport) -> None:
        report = message.report
        if self.closing.is_set():
            return  # quitting: the widgets may already be gone
        if isinstance(report, Notice):
            self.notify(report.message, severity=report.severity, timeout=30 if report.severity == "error" else 10)
        elif isinstance(report, ModelStarting):
            self.set_status(f"vLLM starting ({report.elapsed_s:.0f} s): {report.line}")
        elif isinstance(report, Ready):
            self.query_one(EvaluationPanel).end_phase()  # the reference ran
            self.set_status(self.status_line())
        elif isinstance(report, PromptBuilt):
            self.tokens = report.tokens
            self.set_status(self.status_line())
        elif isinstance(report, Phase):
            self.query_one(EvaluationPanel).show_phase(report)
        elif isinstance(report, TurnStarted):
            self.running[report.trajectory] = report.turn
            if report.trajectory == self.trajectory:
                self.follow_stream()
                self.show_views(self.views(), select=None)
            self.show_strip()
        elif isinstance(report, Replied):
            self.reply_ended(report)
        elif isinstance(report, TurnEnded):
            self.turn_ended(report)
        elif isinstance(report, Evidenced):
            self.evidence_came(report)

    def evidence_came(self, report: Evidenced) -> None:
        """Evidence that follows a verdict finished (or was cancelled): the candidate on show gets it."""
        view = self.shown
        if view is None or view.ref != report.ref:
            return
        self.query_one("#profile", Static).update(profile_renderable(view.verdict))
        self.query_one(EvaluationPanel).show_verdict(view.verdict, self.query_one(EvaluationPanel).whose)

    def reply_ended(self, report: Replied) -> None:
        """The reply on show finished streaming: all of it is shown, not the tail's last frame."""
        streaming = self.streaming
        if streaming is None or report.ref.trajectory != self.trajectory or report.ref.candidate != 0:
            return
        trajectory, reply = streaming
        if trajectory == self.trajectory:
            self.show_reply(reply.reasoning, reply.answer)
        self.streaming = None

    def show_reply(self, reasoning: str, answer: str) -> None:
        self.query_one(LiveTail).display = False
        self.query_one("#reply").display = True
        self.query_one("#reasoning", Markdown).update(f"{reasoning or '_(no reasoning recorded)_'}\n\n---\n\n{answer}")

    def turn_ended(self, report: TurnEnded) -> None:
        self.running.pop(report.trajectory, None)
        self.query_one(EvaluationPanel).end_phase(report.trajectory)
        if report.trajectory != self.trajectory:
            self.show_strip()
            return
        self.shown_chars = -1
        views = self.views()
        first = next((i for i, v in enumerate(views) if v.number == report.turn), None)
        self.show_views(views, select=first)
        if report.outcome == "stopped":
            self.notify("generation stopped; what arrived is kept in the session")

    def follow_stream(self) -> None:
        """A turn of the trajectory on show started: its reply streams into the live tail."""
        self.shown_chars = -1
        self.streaming = None
        live = self.query_one(LiveTail)
        live.clear()
        live.display = True
        self.query_one("#reply").display = False
        self.query_one(TabbedContent).active = "tab-reasoning"

    def show_stream(self) -> None:
        """15 times a second: the bounded tail of the reply streaming in the trajectory on show."""
        reply = self.driver.live(self.trajectory) if self.driver else None
        if reply is None or self.closing.is_set() or not self.query(LiveTail):  # quitting: nothing to paint
            return
        self.streaming = (self.trajectory, reply)
        size = len(reply.reasoning) + len(reply.answer)
        if size == self.shown_chars:
            return
        self.shown_chars = size
        self.query_one(LiveTail).show(reply.reasoning, reply.answer)

    # -- what is on show -----------------------------------------------------------

    def trajectories(self) -> int:
        if self.replay is not None:
            return self.replay.header.trajectories
        return self.driver.trajectories if self.driver else self.config.problem.trajectories

    def views(self, trajectory: int | None = None) -> list[CandidateView]:
        trajectory = self.trajectory if trajectory is None else trajectory
        if self.replay is not None:
            return views_of_session(self.replay, trajectory)
        return self.driver.views(trajectory) if self.driver else []

    def turn_count(self) -> int:
        return len({v.number for t in range(self.trajectories()) for v in self.views(t)})

    def best_ref(self) -> CandidateRef | None:
        if self.driver is not None:
            return self.driver.best()
        best = best_view([v for t in range(self.trajectories()) for v in self.views(t)])
        return best.ref if best else None

    def show_trajectory(self, trajectory: int, select: CandidateRef | None = None) -> None:
        self.trajectory = trajectory
        views = self.views()
        self.show_views(views, select=0 if views else None)
        if select is not None:
            self.query_one(Timeline).select_ref(select)
        if self.driver is not None and self.driver.busy(trajectory):
            self.follow_stream()

    def show_views(self, views: list[CandidateView], select: int | None) -> None:
        self.query_one(Timeline).show(views, self.best_ref(), select, self.running.get(self.trajectory))
        self.show_strip()

    def show_strip(self) -> None:
        states = []
        for trajectory in range(self.trajectories()):
            running = self.driver is not None and self.driver.busy(trajectory)
            views = self.views(trajectory)
            states.append(TrajectoryState(running, best_view(views), views[-1] if views else None))
        self.query_one(Timeline).show_trajectories(states, self.trajectory)

    @on(Timeline.Selected)
    def show_view(self, message: Timeline.Selected) -> None:
        view = message.view
        if self.driver is not None:
            self.driver.select(view.ref)
        if self.driver is None or not self.driver.busy(self.trajectory):
            self.show_reply(view.reasoning, view.answer if view.code is None else (view.summary or ""))
        self.query_one("#kernel", Static).update(kernel_renderable(view.code))
        self.query_one("#profile", Static).update(profile_renderable(view.verdict))
        self.shown = view
        which = f"turn {view.number}" + (f".{view.ref.candidate + 1}" if view.of > 1 else "")
        self.query_one(EvaluationPanel).show_verdict(view.verdict, which)
        base = diff_base(self.query_one(Timeline).views, view)
        label = f"turn {base.number}" if base else ""
        self.query_one("#diff", Static).update(diff_renderable(base.code if base else None, view.code, label))

    def where_said(self) -> str | None:
        """Where the session is and how to go on with it, for the terminal after the app exits."""
        path = self.session_path
        if path is None or not path.exists():
            return None
        return f"the session is in {path} (see it: kevin-tui replay {path}; go on: kevin-tui optimize --resume {path})"

    def set_status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    def status_line(self) -> str:
        if self.driver is None:
            return ""
        info = self.driver.info
        used = f"prompt {self.tokens}/{info.budget}" if self.tokens is not None else f"budget {info.budget}"
        model = info.model.rsplit("/", 1)[-1]  # the organisation is in the session header
        backend = "" if model.startswith(f"{info.backend}:") else f" · {info.backend}"
        parts = [
            info.session.stem,
            f"{model}{backend}",
            info.device,
            f"sandbox {info.sandbox.split(' (')[0]}" if info.sandbox else "",
            used,
        ]
        return " · ".join(p for p in parts if p)  # fits 100 columns: the session first; why a sandbox is off: verdicts

    # -- intents -------------------------------------------------------------------

    def refuse(self, reason: str | None) -> None:
        if reason:
            self.notify(reason, severity="warning")

    def action_continue_turn(self) -> None:
        if self.driver is not None:
            self.refuse(self.driver.continue_(None, self.trajectory))

    def action_continue_all(self) -> None:
        if self.driver is not None:
            self.refuse(self.driver.continue_())

    def action_note(self) -> None:
        def send(note: str | None) -> None:
            if note and self.driver is not None:
                self.refuse(self.driver.continue_(note, self.trajectory))

        self.push_screen(NoteScreen(), send)

    def action_profile_note(self) -> None:
        """Continue with a digest of the shown kernel's profile as the note: where its time goes."""
        view = self.shown
        if view is None or view.verdict is None or not view.verdict.evidence.get("profile"):
            self.notify("no profile to send: select a correct kernel", severity="warning")
            return
        if self.driver is not None:
            self.refuse(self.driver.continue_(profile_note(view.verdict.evidence), self.trajectory))

    def action_retry(self) -> None:
        if self.driver is not None:
            self.refuse(self.driver.retry(self.trajectory))

    def action_stop(self) -> None:
        if self.driver is not None:
            self.driver.stop(self.trajectory)

    def action_next_trajectory(self) -> None:
        self.show_trajectory((self.trajectory + 1) % self.trajectories())

    def action_previous_trajectory(self) -> None:
        self.show_trajectory((self.trajectory - 1) % self.trajectories())

    def action_edit(self) -> None:
        view = self.query_one(Timeline).selected()
        if view is None or not view.code or self.driver is None or self.driver.busy(self.trajectory):
            self.notify("nothing to edit yet" if view is None or not view.code else "a turn is running",
                        severity="warning")  # fmt: skip
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if editor and not self.config.inline_editor:
            self.send_edit(view.ref, self.edit_in_external_editor(editor, view.code))
        else:
            self.push_screen(EditScreen(view.code), lambda code: self.send_edit(view.ref, code))

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

    def send_edit(self, ref: CandidateRef, code: str | None) -> None:
        if code and self.driver is not None:
            self.refuse(self.driver.edit(ref, code))

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_best(self) -> None:
        best = self.best_ref()
        if best is None:
            self.notify("no correct kernel yet")
            return
        self.show_trajectory(best.trajectory, select=best)

    def action_help(self) -> None:
        """? opens the keys and the timeline's legend beside the screen; ? or Escape closes them."""
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()
        self.refresh_bindings()

    def action_close_help(self) -> None:
        self.action_hide_help_panel()
        self.refresh_bindings()

    def action_verdict(self) -> None:
        """The verdict panel maximised (it scrolls: checks, coverage, other sizes), or back."""
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
        else:
            screen.maximize(self.query_one(EvaluationPanel), container=False)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette lists every action with the key that does it (as remapped by [keys])."""
        yield from super().get_system_commands(screen)
        for key, active in screen.active_bindings.items():
            binding = active.binding
            if active.node is self and active.enabled and binding.action in self.ACTION_HELP | TABS:
                title = f"{binding.description} ({self.get_key_display(dataclasses.replace(binding, key=key))})"
                help = self.ACTION_HELP.get(binding.action) or TABS[binding.action]
                yield SystemCommand(title, help, partial(self.run_action, binding.action))

    def action_accept(self) -> None:
        view = self.query_one(Timeline).selected()
        if view is None or view.status != "correct":
            self.notify("only a correct kernel can be accepted", severity="warning")
            return
        self.accept(view.ref)

    @work(group="git", exit_on_error=False)
    async def accept(self, ref: CandidateRef, slower_ok: bool = False, git_init: bool = False) -> None:
        assert self.driver is not None
        outcome = await self.driver.accept(ref, slower_ok, git_init)
        if outcome.ask is None:
            self.notify(outcome.message, severity="information" if outcome.ok else "error")
            self.show_views(self.views(), select=None)  # the row is marked accepted
            if outcome.ok and (question := self.driver.apply_offer()):
                self.push_screen(ConfirmScreen(question), self._apply_if_yes)
            return
        ask = outcome.ask

        def answer(yes: bool | None) -> None:
            if yes:
                self.accept(ref, slower_ok or ask == "slower", git_init or ask == "git_init")

        self.push_screen(ConfirmScreen(outcome.text), answer)

    def _apply_if_yes(self, yes: bool | None) -> None:
        if yes:
            self.apply_kernel()

    @work(group="git", exit_on_error=False)
    async def apply_kernel(self) -> None:
        """The accepted kernel into the user's model (kevin-tui apply --check), offered after an accept."""
        assert self.driver is not None
        self.notify("checking the kernel in your model: before and after…")
        outcome = await self.driver.apply()
        self.notify(outcome.message, severity="information" if outcome.ok else "error", timeout=30)

    @work(group="git", exit_on_error=False)
    async def action_undo(self) -> None:
        if self.driver is not None:
            outcome = await self.driver.undo()
            self.notify(outcome.message, severity="information" if outcome.ok else "warning")

    async def action_quit(self) -> None:
        """Running turns are stopped, their builds and workers killed, and the session records the
        stop before the app exits (at once: no turn is waited out). A commit, undo or install already
        under way is finished first: cancelled, its git change would stand without its session event."""
        if self.closing.is_set():
            return
        self.closing.set()
        self.set_status("quitting: stopping the turn and its workers…")
        for group in ("run", "git"):
            for worker in [w for w in self.workers if w.group == group]:
                if group == "git" and not worker.is_finished:
                    self.set_status("quitting: finishing the commit or install under way…")
                with contextlib.suppress(WorkerCancelled, WorkerFailed):
                    await worker.wait()
        self.exit()

    def action_help_quit(self) -> None:
        """Ctrl-C quits, as a user expects (a focused text field keeps it for copying)."""
        self.call_later(self.action_quit)
