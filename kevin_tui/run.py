"""Opening what one problem's run needs, in the right order, and closing it in reverse.

Two scopes. The problem scope (`open_problem`): the problem file (or the session to resume) and an
evaluator whose reference has run, so a broken problem costs seconds, not a model start. The run
(`open_run`) joins it with an open backend (`kevin_tui.models.factory.open_backend`, which may serve
many problems): the session file and one agent per trajectory. The reference runs in a thread, so
an app stays responsive while it does.
"""

from __future__ import annotations

import asyncio
import platform
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kevin_tui import __version__
from kevin_tui.config import ProblemConfig
from kevin_tui.errors import EXIT_USAGE, KevinError
from kevin_tui.evaluator import EnvironmentProblem, Evaluator
from kevin_tui.judge import Judge, JudgeFactory, ProgressFn
from kevin_tui.loop import Agent, Listener, LoopConfig
from kevin_tui.models.base import Backend, Sampling
from kevin_tui.models.tokens import PromptTokens
from kevin_tui.problem import Problem, load_problem, parse_problem_source
from kevin_tui.protocol.prompt import PromptBuilder
from kevin_tui.protocol.templates import Templates, load_templates
from kevin_tui.session import Header, Session, SessionWriter, find_session, load_session, new_session_id
from kevin_tui.session.events import PromptEvent, ResumeEvent


class RunError(KevinError):
    """The run cannot start; the message says why."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class ProblemScope:
    """A problem ready to be worked on: its evaluator has run the reference."""

    config: ProblemConfig
    problem: Problem
    evaluator: Judge
    environment: dict
    templates: Templates
    session_id: str
    resumed: Session | None = None
    notices: list[str] = field(default_factory=list)
    speed_of_light: str | None = None  # one line for the first prompt: the least time the problem can take


@dataclass
class Run:
    scope: ProblemScope
    backend: Backend
    writer: SessionWriter
    agents: list[Agent]

    @property
    def problem(self) -> Problem:
        return self.scope.problem

    @property
    def evaluator(self) -> Judge:
        return self.scope.evaluator


def recorded_problem(session: Session, copy: Path, notices: list[str]) -> Problem:
    """The problem exactly as the session recorded it: its file if unchanged, else the recorded source
    written to `copy` (the workers import problems from files)."""
    recorded = session.header.problem
    original = Path(recorded["path"])
    if original.exists():
        on_disk = load_problem(original)
        if on_disk.sha256 == recorded["sha256"]:
            return on_disk
    copy.write_text(recorded["source"])
    why = "was changed" if original.exists() else "is gone"
    notices.append(f"{original} {why} since the session began; using the recorded version ({copy})")
    return parse_problem_source(recorded["source"], copy)


def _load(config: ProblemConfig) -> tuple[Problem, Session | None, list[str]]:
    notices: list[str] = []
    if config.resume:
        resumed = load_session(find_session(config.sessions_dir, config.resume))
        if resumed.warning:
            notices.append(resumed.warning)
        return recorded_problem(resumed, resumed.path.with_suffix(".problem.py"), notices), resumed, notices
    if config.problem is None:
        raise RunError("optimize needs a problem file (or --resume)")
    return load_problem(config.problem), None, notices


@asynccontextmanager
async def open_problem(
    config: ProblemConfig, on_progress: ProgressFn | None = None, judge: JudgeFactory = Evaluator
) -> AsyncIterator[ProblemScope]:
    """The problem and its evaluator (made by `judge`: batch mode may judge elsewhere), the reference
    run; raises KevinError (RunError, ProblemError...)."""
    problem, resumed, notices = _load(config)
    templates = load_templates(config.prompts)
    evaluator = judge(problem, config.evaluation, on_progress)
    try:
        try:
            environment = await asyncio.to_thread(lambda: evaluator.environment)
            speed_of_light = await asyncio.to_thread(evaluator.speed_of_light_line)
        except EnvironmentProblem as exc:
            raise RunError(f"cannot evaluate here: {exc}", exit_code=4) from None
        session_id = resumed.id if resumed else new_session_id()
        yield ProblemScope(
            config, problem, evaluator, environment, templates, session_id, resumed, notices, speed_of_light
        )
    finally:
        evaluator.close()


def session_header(
    scope: ProblemScope, backend: Backend, sampling: Sampling, launch: dict[str, Any] | None = None
) -> Header:
    config, problem = scope.config, scope.problem
    return Header(
        id=scope.session_id,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        problem={"path": str(problem.path), "sha256": problem.sha256, "source": problem.source},
        model=backend.model,
        backend=backend.name,
        sampling=asdict(sampling),
        prompts_version=scope.templates.version,
        prompts=scope.templates.source,
        prompts_files=scope.templates.fingerprints,
        budget=config.budget,
        candidates=config.candidates,
        trajectories=config.trajectories,
        machine={**scope.environment, "python": platform.python_version(), "kevin_tui": __version__},
        launch=launch or {},
    )


@asynccontextmanager
async def open_run(
    scope: ProblemScope,
    backend: Backend,
    sampling: Sampling,
    listener: Listener | None = None,
    launch: dict[str, Any] | None = None,
) -> AsyncIterator[Run]:
    """The session file and one agent per trajectory (restored when resuming)."""
    config, resumed = scope.config, scope.resumed
    path = resumed.path if resumed else config.sessions_dir / f"{scope.session_id}.jsonl"
    writer = SessionWriter(path, None if resumed else session_header(scope, backend, sampling, launch))
    try:
        tokens = PromptTokens(backend)
        builder = PromptBuilder(
            scope.templates, scope.problem.source, config.budget, tokens, tokens.counted_with, scope.speed_of_light
        )
        loop_config = LoopConfig(config.candidates, sampling)
        count = resumed.header.trajectories if resumed else config.trajectories
        agents = [
            Agent(builder, backend, scope.evaluator, scope.templates, writer, loop_config, listener, t, tokens)
            for t in range(count)
        ]
        if resumed:
            records = resumed.candidates()
            for agent in agents:
                mine = [r for r in records if r.ref.trajectory == agent.trajectory]
                prompts = {e.turn: e for e in resumed.of_type(PromptEvent) if e.trajectory == agent.trajectory}
                agent.restore(mine, prompts)
            writer.write(ResumeEvent(turn=max(a.next_number for a in agents)))
        yield Run(scope, backend, writer, agents)
    finally:
        writer.close()
