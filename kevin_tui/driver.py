"""The driver: every decision of a run, behind intents that any front end calls.

The TUI, headless mode (and batch mode) send intents — continue (one trajectory or all, with a
note), select, retry, edit, accept, undo, stop, close — and render the reports the driver sends
back; they decide nothing. The driver decides:

- which candidate continues: the one the user selected in the latest turn, else the best by the
  one ranking rule (kevin_tui.ranking); it enters the history when the next turn starts;
- retry: the latest turn is sampled again from its own prompt, the new candidates join the turn,
  and whichever is chosen replaces the turn's earlier choice (the history never holds a turn twice);
- edit: the edited kernel becomes its own turn, after the kernel it was edited from;
- accept: exactly the candidate asked for, only if correct; a kernel slower than the reference, or
  a directory that is not a repository, is a question for the user first;
- apply: after an accept, for a problem made from the user's own module, installing the kernel in
  their model with the end-to-end check is offered (kevin_tui.usermodel.apply);
- scheduling: trajectories run side by side; generation, builds and evaluation share the machine
  through a gate (kevin_tui.device_gate; batch mode brings its own, shared by many problems);
- the session's stop and end events.

Reports may come from worker threads (evaluation progress): a front end's reporter must be
thread-safe (Textual's post_message is).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from kevin_tui.config import RunConfig
from kevin_tui.device_gate import DeviceGate, Gate
from kevin_tui.errors import KevinError
from kevin_tui.evaluator import Evaluator, Verdict, header_cache
from kevin_tui.evaluator.host.sanitizer import first_finding, tools_for
from kevin_tui.evaluator.host.sanitizer import summary as sanitizer_summary
from kevin_tui.judge import Judge, JudgeFactory
from kevin_tui.loop import Agent, Candidate, Evaluating, Turn
from kevin_tui.models.base import Backend, BackendError, Reply
from kevin_tui.models.factory import launch_record, open_backend
from kevin_tui.protocol.prompt import estimate_tokens
from kevin_tui.ranking import best_correct, speed_class
from kevin_tui.repo import (
    Accepted,
    AcceptInfo,
    GitProblem,
    NotARepository,
    accept_beside,
    kernel_path_for,
    undo_last_accept,
)
from kevin_tui.run import ProblemScope, Run, open_problem, open_run
from kevin_tui.session import CandidateRef
from kevin_tui.session.events import (
    AcceptEvent,
    EndEvent,
    ErrorEvent,
    EvaluationEvent,
    Event,
    EvidenceEvent,
    PromptEvent,
    ReplyEvent,
    StopEvent,
    UndoEvent,
)
from kevin_tui.usermodel.apply import CheckOptions, apply_kernel
from kevin_tui.views import CandidateView, views_of_turns

FIRST_BUILD_HINT = "first build on this machine: precompiling headers, about a minute"
NEW_FLAGS_HINT = "precompiling headers for these compiler flags, about a minute"
Severity = Literal["information", "warning", "error"]


# -- reports ------------------------------------------------------------------


@dataclass(frozen=True)
class ModelStarting:
    elapsed_s: float
    line: str


@dataclass(frozen=True)
class Ready:
    """The run is open: reference run, model reachable, session file written."""


@dataclass(frozen=True)
class TurnStarted:
    trajectory: int
    turn: int
    kind: Literal["turn", "retry", "edit"] = "turn"


@dataclass(frozen=True)
class PromptBuilt:
    trajectory: int
    turn: int
    tokens: int
    budget: int


@dataclass(frozen=True)
class Phase:
    """The evaluator moved to a phase (reference, build, check, judge, time, done) at `started`
    (time.monotonic())."""

    ref: CandidateRef | None
    name: str
    detail: str
    started: float


TurnOutcome = Literal["done", "stopped", "failed"]


@dataclass(frozen=True)
class TurnEnded:
    """A trajectory is idle again; `turn` is None when the turn failed before it had one."""

    trajectory: int
    turn: int | None
    outcome: TurnOutcome


@dataclass(frozen=True)
class Replied:
    """A reply finished streaming: its length in tokens (the server's count, else an estimate)."""

    ref: CandidateRef
    tokens: int


@dataclass(frozen=True)
class Judged:
    """A candidate has its verdict."""

    ref: CandidateRef
    status: str
    speedup: float | None


@dataclass(frozen=True)
class Evidenced:
    """Evidence that follows a verdict came in: a part finished (`part`), or `cancelled` never will; the
    candidate's verdict has it."""

    ref: CandidateRef
    part: str
    cancelled: list[str]
    evidence: dict[str, Any]  # what the part found


@dataclass(frozen=True)
class Notice:
    message: str
    severity: Severity = "information"


Report = ModelStarting | Ready | TurnStarted | PromptBuilt | Phase | TurnEnded | Replied | Judged | Evidenced | Notice
Reporter = Callable[[Report], None]


@dataclass(frozen=True)
class RunInfo:
    """What a status line shows."""

    model: str
    backend: str
    device: str
    budget: int
    session: Path
    sandbox: str = ""  # "bwrap", "unshare", or "off (why)": shown, so an unsandboxed run is never silent


@dataclass(frozen=True)
class Outcome:
    """What came of an accept or undo: done, refused, or a question (`ask`) to put to the user
    before calling again with the matching permission."""

    message: str
    ok: bool = True
    ask: Literal["slower", "git_init"] | None = None
    question: str = ""  # with `ask`: the question itself, which a front end without a dialog leaves out

    @property
    def text(self) -> str:
        return f"{self.message}\n\n{self.question}" if self.question else self.message

    @property
    def without_dialog(self) -> str:
        """For a command line that cannot ask: the refusal, and the flag that answers the question
        (`optimize --headless` and `eval` both have them)."""
        answer = {"slower": "--accept-slower commits it anyway", "git_init": "--git-init creates one"}
        return f"not accepted: {self.message} ({answer[self.ask]})" if self.ask else self.message


@dataclass(frozen=True)
class AcceptRequest:
    """A kernel someone asked to commit, with what its verdict said and what they allowed."""

    problem: Path
    code: str
    what: str  # how a question names it: "turn 3", "cand.py"
    status: str
    speedup: float | None
    speedup_compile: float | None = None
    speedup_interval: tuple[float, float] | None = None  # 95%: what says slower, faster or the same
    device: str = ""
    slower_ok: bool = False
    git_init: bool = False
    git: bool = True
    name: str | None = None  # the kernel file's name (default <module>_kernel.py)
    model: str | None = None
    session_id: str | None = None
    turn: int | None = None


@dataclass(frozen=True)
class AcceptResult:
    outcome: Outcome
    accepted: Accepted | None = None
    git_error: str | None = None  # the repository refused (recorded in the session as a failed accept)


def interval_of(verdict: Verdict | None) -> tuple[float, float] | None:
    """A verdict's 95% speedup interval as the accept decision reads it."""
    interval = verdict.speedup_interval if verdict is not None else None
    return (float(interval[0]), float(interval[1])) if interval else None


def refused(request: AcceptRequest) -> AcceptResult | None:
    """Why the kernel is not committed as asked: its verdict is not correct, or it is slower than the
    reference without leave (a question). None when only the last checks (compute-sanitizer, git) remain."""
    if request.status != "correct" or not request.code:
        return AcceptResult(Outcome(f"not accepted: the verdict is {request.status}", ok=False))
    speedup = request.speedup
    if speed_class(speedup, request.speedup_interval) == "slower" and not request.slower_ok:
        slower = f"{request.what} is slower than the reference ({speedup:.2f}x vs eager)"
        return AcceptResult(Outcome(slower, ok=False, ask="slower", question="Accept it anyway?"))
    return None


def accept_gate(
    evaluator: Judge, code: str, verdict: Verdict | None, choice: str
) -> Callable[[], dict[str, Any]] | None:
    """The compute-sanitizer check a kernel about to be accepted on CUDA gets (host/sanitizer.py), per the
    `--sanitize` choice; None where it is not asked for or the evaluator cannot run it (batch's)."""
    check = getattr(evaluator, "sanitize", None)
    tools = tools_for(choice, at_accept=True)
    if not tools or check is None or not evaluator.device.startswith("cuda"):
        return None
    if verdict is not None and (done := verdict.evidence.get("sanitizer")):  # already run after the verdict
        return lambda: done
    return lambda: check(code, tools)


def accept_kernel(request: AcceptRequest) -> AcceptResult:
    """The one accept decision, for the app, headless mode and `eval --accept`: only a correct kernel;
    one slower than the reference, or a directory that is not a repository, is a question first."""
    if (refusal := refused(request)) is not None:
        return refusal
    speedup = request.speedup
    info = AcceptInfo(
        module=request.problem.stem, speedup=speedup, speedup_compile=request.speedup_compile,
        speedup_interval=request.speedup_interval, device=request.device, model=request.model,
        session_id=request.session_id, turn=request.turn,
    )  # fmt: skip
    try:
        accepted = accept_beside(request.problem, request.code, info, request.name, request.git, request.git_init)
    except NotARepository as exc:
        return AcceptResult(Outcome(str(exc), ok=False, ask="git_init", question="Create a git repository there now?"))
    except GitProblem as exc:
        return AcceptResult(Outcome(f"not accepted: {exc}", ok=False), git_error=str(exc))
    return AcceptResult(Outcome(accepted.summary()), accepted)


# -- the driver -----------------------------------------------------------------


@dataclass
class Track:
    """One trajectory: its agent, the task running its turn, and the user's selection."""

    agent: Agent
    task: asyncio.Task | None = None
    selected: int | None = None
    evidence: list[asyncio.Task] = field(default_factory=list)  # judgements whose evidence still runs

    @property
    def running(self) -> asyncio.Task | None:
        """The task of the turn under way, if one is."""
        return self.task if self.task is not None and not self.task.done() else None

    @property
    def busy(self) -> bool:
        return self.running is not None

    @property
    def latest(self) -> Turn | None:
        return self.agent.turns[-1] if self.agent.turns else None


class Driver:
    def __init__(self, config: RunConfig, report: Reporter) -> None:
        self.config = config
        self.report = report
        self.run: Run | None = None
        self.tracks: list[Track] = []
        self.gate: Gate = DeviceGate(exclusive=False)
        self._evaluating: CandidateRef | None = None
        self._ended = False  # a stop or end event is written
        self._accepted: set[CandidateRef] = set()

    @classmethod
    @asynccontextmanager
    async def open(cls, config: RunConfig, report: Reporter, judge: JudgeFactory = Evaluator) -> AsyncIterator[Driver]:
        """Problem (reference run), backend, session and agents; raises KevinError if the run cannot start.
        On exit, running turns are stopped and a stop event is written unless the run ended. `judge`
        makes the evaluator (tests of what sits above it give a fake one)."""
        driver = cls(config, report)
        kind = config.backend.resolve()
        async with open_problem(config.problem, driver._on_progress, judge) as scope:
            for notice in scope.notices:
                report(Notice(notice, "warning"))

            def starting(elapsed: float, line: str) -> None:
                report(ModelStarting(elapsed, line))

            async with open_backend(config.backend, starting) as backend:
                gate = DeviceGate(exclusive=kind.capabilities.local_gpu)
                async with driver._running(scope, backend, gate):
                    yield driver

    @classmethod
    @asynccontextmanager
    async def attach(
        cls, config: RunConfig, report: Reporter, scope: ProblemScope, backend: Backend, gate: Gate
    ) -> AsyncIterator[Driver]:
        """A driver on a problem scope and a backend that the caller holds, with the caller's gate
        (batch mode: one backend and one set of limits for many problems). Closing it ends the run
        as `open` does; the scope and the backend stay open."""
        driver = cls(config, report)
        async with driver._running(scope, backend, gate):
            yield driver

    @asynccontextmanager
    async def _running(self, scope: ProblemScope, backend: Backend, gate: Gate) -> AsyncIterator[None]:
        launch = launch_record(self.config.backend)
        async with open_run(scope, backend, self.config.backend.sampling, self._on_loop_event, launch) as run:
            self.run = run
            self.tracks = [Track(agent) for agent in run.agents]
            self.gate = gate
            self.report(Ready())
            try:
                yield
            except (asyncio.CancelledError, KeyboardInterrupt):
                await self._wind_down("interrupted")
                raise
            except BaseException:
                await self._wind_down("error")
                raise
            await self._wind_down("quit")

    # -- queries ---------------------------------------------------------------

    @property
    def session_path(self) -> Path:
        assert self.run is not None
        return self.run.writer.path

    @property
    def trajectories(self) -> int:
        return len(self.tracks)

    @property
    def info(self) -> RunInfo:
        assert self.run is not None
        run = self.run
        device = run.scope.environment.get("gpu") or run.scope.environment.get("device", "?")
        sandbox = run.scope.environment.get("sandbox", "")
        return RunInfo(
            run.backend.model, run.backend.name, device, self.config.problem.budget, run.writer.path, sandbox
        )

    def busy(self, trajectory: int | None = None) -> bool:
        tracks = self.tracks if trajectory is None else [self.tracks[trajectory]]
        return any(t.busy for t in tracks)

    def live(self, trajectory: int) -> Reply | None:
        """The first candidate's reply while it streams."""
        replies = self.tracks[trajectory].agent.live
        return replies[0] if replies else None

    def views(self, trajectory: int) -> list[CandidateView]:
        views = views_of_turns(self.tracks[trajectory].agent.turns)
        return [replace(v, accepted=True) if v.ref in self._accepted else v for v in views]

    def turn(self, trajectory: int, number: int) -> Turn | None:
        return next((t for t in self.tracks[trajectory].agent.turns if t.number == number), None)

    def candidate(self, ref: CandidateRef) -> Candidate | None:
        turn = self.turn(ref.trajectory, ref.turn)
        return next((c for c in turn.candidates if c.index == ref.candidate), None) if turn else None

    def best(self) -> CandidateRef | None:
        """The best candidate of every trajectory, by the one ranking rule."""
        candidates = [c for t in self.tracks for turn in t.agent.turns for c in turn.candidates]
        best = best_correct(candidates, lambda c: c.score)
        return best.ref if best else None

    def continuing(self, trajectory: int) -> Candidate | None:
        """The candidate of the latest turn that the next turn would continue from."""
        track = self.tracks[trajectory]
        turn = track.latest
        if turn is None or not turn.candidates:
            return None
        index = track.selected if track.selected is not None else turn.chosen
        return turn.candidates[index] if index is not None else turn.ranked()[0]

    def build_log(self) -> Path | None:
        return self.run.evaluator.last_log if self.run else None

    def build_hint(self) -> str | None:
        """Why a build is slow, when it is one of the slow ones: torch's headers are being precompiled
        (once per set of compiler flags; read from the build cache's precompiled-header store)."""
        cache = self.config.problem.evaluation.cache_dir
        if not header_cache.any_made(cache):
            return FIRST_BUILD_HINT
        if header_cache.one_being_made(cache):
            return NEW_FLAGS_HINT
        return None

    # -- intents -----------------------------------------------------------------

    def continue_(self, note: str | None = None, trajectory: int | None = None) -> str | None:
        """Start the next turn of one trajectory, or of every idle one; returns why not, if not."""
        targets = self.tracks if trajectory is None else [self.tracks[trajectory]]
        idle = [t for t in targets if not t.busy]
        if not idle:
            return "a turn is already running (s stops it)"
        for track in idle:
            self._start(track, self._next_turn(track, note))
        if len(idle) < len(targets):
            running = ", ".join(str(t.agent.trajectory + 1) for t in targets if t.busy)
            return f"trajectory {running} is still running; the others continue"
        return None

    def retry(self, trajectory: int) -> str | None:
        track = self.tracks[trajectory]
        turn = track.latest
        if track.busy:
            return "a turn is already running (s stops it)"
        if turn is None or turn.prompt is None:
            return "nothing to retry yet" if turn is None else "this hand edit has no recorded prompt to sample"
        self._start(track, self._retry(track, turn))
        return None

    def edit(self, ref: CandidateRef, code: str) -> str | None:
        track = self.tracks[ref.trajectory]
        if track.busy:
            return "a turn is already running (s stops it)"
        self._start(track, self._edit(track, self.candidate(ref), code))
        return None

    def select(self, ref: CandidateRef) -> None:
        """The user is looking at this candidate: if it belongs to its trajectory's latest turn, it is
        the one that continues."""
        track = self.tracks[ref.trajectory]
        if track.latest is not None and track.latest.number == ref.turn:
            track.selected = ref.candidate

    def stop(self, trajectory: int | None = None) -> None:
        for track in self.tracks if trajectory is None else [self.tracks[trajectory]]:
            track.agent.stop()

    async def accept(self, ref: CandidateRef, slower_ok: bool = False, git_init: bool = False) -> Outcome:
        """Commit exactly this candidate's kernel beside the problem; the session records the outcome."""
        assert self.run is not None
        candidate = self.candidate(ref)
        if candidate is None:
            return Outcome("only a correct kernel can be accepted", ok=False)
        run = self.run
        verdict = candidate.verdict
        request = AcceptRequest(
            problem=run.problem.path, code=candidate.code or "", what=f"turn {ref.turn}", status=candidate.status,
            speedup=candidate.speedup, speedup_compile=verdict.speedup_compile if verdict else None,
            speedup_interval=interval_of(verdict),
            device=run.scope.environment.get("gpu") or run.evaluator.device, slower_ok=slower_ok, git_init=git_init,
            model=run.backend.model, session_id=run.scope.session_id, turn=ref.turn,
        )  # fmt: skip
        record = functools.partial(
            AcceptEvent, trajectory=ref.trajectory, turn=ref.turn, candidate=ref.candidate, speedup=request.speedup
        )
        sanitized = await self._sanitized(candidate) if refused(request) is None else None
        if sanitized and (finding := first_finding(sanitized)):
            run.writer.write(record(error=finding.describe()))
            return Outcome(f"not accepted: {finding.describe()} (the kernel is in the session)", ok=False)
        result = await asyncio.to_thread(accept_kernel, request)
        if result.git_error is not None:
            run.writer.write(record(error=result.git_error))
            return Outcome(f"{result.outcome.message} (the kernel is in the session)", ok=False)
        accepted = result.accepted
        if accepted is None:
            return result.outcome
        run.writer.write(record(commit=accepted.commit, path=str(accepted.path)))
        self._accepted.add(ref)
        turn = self.turn(ref.trajectory, ref.turn)
        which = f"turn {ref.turn}" + (f".{ref.candidate + 1}" if turn and len(turn.candidates) > 1 else "")
        checked = f" ({sanitizer_summary(sanitized)})" if sanitized else ""
        return Outcome(f"accepted {which}: {accepted.summary()}{checked}")

    async def _sanitized(self, candidate: Candidate) -> dict[str, Any] | None:
        """The compute-sanitizer gate for an accept, run while no kernel is being timed."""
        assert self.run is not None
        choice = self.config.problem.evaluation.sanitize
        if (gate := accept_gate(self.run.evaluator, candidate.code or "", candidate.verdict, choice)) is None:
            return None
        async with self.gate.evaluating():
            return await asyncio.to_thread(gate)

    async def undo(self) -> Outcome:
        """Take back the last accepted kernel, if it is still HEAD and untouched."""
        run = self.run
        assert run is not None
        try:
            message = await asyncio.to_thread(undo_last_accept, run.problem.path)
        except GitProblem as exc:
            return Outcome(f"cannot undo: {exc}", ok=False)
        run.writer.write(UndoEvent(message=message))
        return Outcome(message)

    def apply_offer(self) -> str | None:
        """The question to ask after an accept when the problem was made from a module of the user's
        (None otherwise): install the kernel in their model, checked end to end."""
        origin = self.run.problem.origin if self.run else None
        if origin is None:
            return None
        model = (origin.get("model") or {}).get("target") or f"{origin['class']} alone"
        return (f"Install this kernel in your model? kevin-tui apply writes an install(model) helper beside it, "
                f"runs {model} before and after (outputs and end-to-end time), and commits the helper if they "
                "match.")  # fmt: skip

    async def apply(self) -> Outcome:
        """Install the accepted kernel in the user's model with the end-to-end check; the session records it."""
        assert self.run is not None
        problem = self.run.problem.path
        options = CheckOptions(device=self.config.problem.evaluation.device)
        try:
            applied = await asyncio.to_thread(apply_kernel, kernel_path_for(problem), problem, True, options)
        except KevinError as exc:
            return Outcome(f"not applied: {exc}", ok=False)
        self.run.writer.write(applied.event())
        return Outcome("\n".join(applied.lines()), ok=applied.passed is not False and applied.error is None)

    async def accept_best(self, slower_ok: bool = False, git_init: bool = False) -> Outcome:
        best = self.best()
        if best is None:
            return Outcome("no correct kernel to accept", ok=False)
        return await self.accept(best, slower_ok, git_init)

    async def advance(self, note: str | None = None) -> list[Turn]:
        """One turn of every trajectory, side by side, awaited (headless and batch mode); the first
        failure is raised, and closing the driver stops the other trajectories."""
        for track in self.tracks:
            track.task = asyncio.create_task(self._next_turn(track, note))
        return list(await asyncio.gather(*(t.task for t in self.tracks if t.task is not None)))

    async def finish(self) -> None:
        """The run is over: the evidence still running finishes, each latest turn's default choice enters
        the history (a resumed turn never judged is judged now, and its evidence finishes too); an end event,
        the session's last."""
        await asyncio.gather(*(task for track in self.tracks for task in track.evidence))
        for track in self.tracks:
            await self._settle(track)
        await asyncio.gather(*(task for track in self.tracks for task in track.evidence))
        assert self.run is not None
        best = self.best()
        candidate = self.candidate(best) if best else None
        turns = max((t.latest.number for t in self.tracks if t.latest), default=0)
        self.run.writer.write(EndEvent(turns=turns, best_speedup=candidate.speedup if candidate else None))
        self._ended = True

    # -- the work ------------------------------------------------------------------

    def _start(self, track: Track, work: Coroutine[Any, Any, Turn]) -> None:
        """The user moved on: the evidence still running for the trajectory is cancelled (what finished
        is kept) and the turn starts when the cancellations are recorded."""
        cancelled = self._cancel_evidence(track)
        track.task = asyncio.create_task(self._guarded(track, work, cancelled))

    def _cancel_evidence(self, track: Track) -> list[asyncio.Task]:
        running, track.evidence = [t for t in track.evidence if not t.done()], []
        for task in running:
            task.cancel()
        return running

    async def _guarded(self, track: Track, work: Coroutine[Any, Any, Turn], after: list[asyncio.Task]) -> None:
        """A turn started by an intent: failures become reports, never exceptions in the front end."""
        trajectory = track.agent.trajectory
        turn: Turn | None = None
        try:
            await asyncio.gather(*after, return_exceptions=True)
            turn = await work
        except BackendError as exc:
            self.report(Notice(f"turn failed: {exc} (the session is kept)", "error"))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a broken environment: shown, and the app lives on
            self.report(Notice(f"trajectory {trajectory + 1} failed: {type(exc).__name__}: {exc}", "error"))
        finally:
            outcome: TurnOutcome = "failed" if turn is None else "stopped" if turn.stopped else "done"
            self.report(TurnEnded(trajectory, turn.number if turn else None, outcome))

    async def _settle(self, track: Track) -> None:
        """The latest turn's chosen candidate (the selection, else the best) enters the history."""
        turn = track.latest
        if turn is None or not turn.candidates:
            return
        unjudged = [c for c in turn.candidates if c.feedback is None]  # a resumed, interrupted turn
        if unjudged:
            await self._judge(track, unjudged)
        chosen = self.continuing(track.agent.trajectory)
        if chosen is not None and chosen.index != turn.chosen:
            track.agent.choose(turn, chosen.index)
        track.selected = None

    async def _next_turn(self, track: Track, note: str | None) -> Turn:
        agent = track.agent
        await self._settle(track)
        self.report(TurnStarted(agent.trajectory, agent.next_number))
        async with self.gate.generating():
            turn = await agent.generate(note)
        await self._judge(track, turn.candidates)
        return turn

    async def _retry(self, track: Track, turn: Turn) -> Turn:
        self.report(TurnStarted(track.agent.trajectory, turn.number, "retry"))
        async with self.gate.generating():
            new = await track.agent.resample(turn)
        await self._judge(track, new)
        track.selected = None
        return turn

    async def _edit(self, track: Track, base: Candidate | None, code: str) -> Turn:
        agent = track.agent
        latest = track.latest
        if base is not None and latest is not None and base in latest.candidates and latest.chosen is None:
            track.selected = base.index
            await self._settle(track)  # the kernel edited from enters the history first
        turn = await agent.edit(code, base)
        self.report(TurnStarted(agent.trajectory, turn.number, "edit"))
        await self._judge(track, turn.candidates)
        agent.choose(turn, 0)
        return turn

    async def _judge(self, track: Track, candidates: list[Candidate]) -> None:
        """Build (several candidates in parallel), then check and time them, each when the gate allows;
        returns with the verdicts, while their evidence goes on in a task of its own (track.evidence)."""
        judged = asyncio.Event()
        task = asyncio.create_task(self._judge_then_evidence(track.agent, candidates, judged))
        waiting = asyncio.create_task(judged.wait())
        try:
            await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        finally:
            waiting.cancel()
        if task.done():
            task.result()  # its failure is the turn's
        else:
            track.evidence.append(task)

    async def _judge_then_evidence(self, agent: Agent, candidates: list[Candidate], judged: asyncio.Event) -> None:
        """The gate is held from the verdicts to the end of their evidence: the candidate's process stays
        alive for it, and the evidence runs the candidate, so no other kernel is built or timed meanwhile."""
        async with self.gate.building():
            await agent.build(candidates, alone=self.gate.separate_builds)
        async with self.gate.evaluating():
            await agent.evaluate(candidates)
            judged.set()
            try:
                for candidate in candidates:
                    await agent.gather_evidence(candidate)
            except asyncio.CancelledError:
                for candidate in candidates:  # the rest never started: recorded as cancelled too
                    agent.cancel_evidence(candidate)
                raise
            except Exception as exc:  # evidence is never the turn's failure; what did not come is recorded
                for candidate in candidates:
                    agent.cancel_evidence(candidate)
                self.report(Notice(f"the evidence after the verdict failed: {type(exc).__name__}: {exc}", "warning"))

    async def _wind_down(self, reason: str = "quit") -> None:
        tasks = [task for track in self.tracks if (task := track.running) is not None]
        self.stop()
        for task in tasks:
            task.cancel()
        for track in self.tracks:
            tasks += self._cancel_evidence(track)
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.run is not None and not self._ended:
            self.run.writer.write(StopEvent(reason=reason))
            self._ended = True

    # -- what the loop and the evaluator tell us ---------------------------------------

    def _on_loop_event(self, event: Event | Evaluating) -> None:
        if isinstance(event, Evaluating):
            self._evaluating = event.ref
        elif isinstance(event, PromptEvent):
            self.report(PromptBuilt(event.trajectory, event.turn, event.tokens, self.config.problem.budget))
        elif isinstance(event, ReplyEvent):
            tokens = event.completion_tokens
            if tokens is None:
                tokens = estimate_tokens(event.reasoning + event.answer)
            self.report(Replied(event.ref, tokens))
        elif isinstance(event, EvaluationEvent):
            self.report(Judged(event.ref, event.verdict.status.value, event.verdict.speedup))
        elif isinstance(event, EvidenceEvent):
            self.report(Evidenced(event.ref, event.part, event.cancelled, event.evidence))
        elif isinstance(event, ErrorEvent) and event.source == "evaluator":  # backend errors end the turn
            self.report(Notice(f"{event.message}; judging it again", "warning"))

    def _on_progress(self, phase: str, detail: str) -> None:
        """From the evaluator's thread."""
        self.report(Phase(self._evaluating if phase != "reference" else None, phase, detail, time.monotonic()))
