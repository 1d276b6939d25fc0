"""Everything one optimize run needs, opened in the right order and closed in reverse.

The problem is loaded and its reference run before any model is loaded, so a broken problem
costs seconds, not a model start. Shared by headless mode and the TUI.
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kevin_tui import __version__
from kevin_tui.evaluator import EnvironmentProblem, Evaluator
from kevin_tui.evaluator.cli_options import options_from
from kevin_tui.loop import Agent, Listener, LoopConfig
from kevin_tui.models.base import Backend, Sampling
from kevin_tui.models.factory import backend_config_from, open_backend
from kevin_tui.models.vllm_server import ProgressFn
from kevin_tui.problem import Problem, ProblemError, load_problem, parse_problem_source
from kevin_tui.protocol.prompt import Attempt, PromptBuilder, token_counter
from kevin_tui.protocol.templates import Templates, load_templates
from kevin_tui.repo import AcceptInfo, GitProblem, KernelRepo, kernel_path_for
from kevin_tui.session import Session, SessionError, SessionWriter, find_session, load_session, new_session_id

EXIT_USAGE = 2


class RunError(Exception):
    """The run cannot start; the message says why."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Run:
    problem: Problem
    evaluator: Evaluator
    backend: Backend
    writer: SessionWriter
    templates: Templates
    agents: list[Agent]
    session_id: str
    resumed: Session | None = None
    notices: list[str] | None = None


def session_header(
    problem: Problem, args: argparse.Namespace, backend: Backend, sampling: Sampling, templates: Templates, env: dict
) -> dict:
    return {
        "id": args.session_id,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "problem": {"path": str(problem.path), "sha256": problem.sha256, "source": problem.source},
        "model": backend.model,
        "backend": backend.name,
        "sampling": asdict(sampling),
        "prompts_version": templates.version,
        "budget": args.budget,
        "candidates": args.candidates,
        "trajectories": args.trajectories,
        "machine": {**env, "python": platform.python_version(), "kevin_tui": __version__},
    }


def _load(args: argparse.Namespace) -> tuple[Problem, Session | None, list[str]]:
    notices: list[str] = []
    if args.resume:
        try:
            resumed = load_session(find_session(Path(args.sessions_dir), args.resume))
        except SessionError as exc:
            raise RunError(str(exc)) from None
        if resumed.warning:
            notices.append(resumed.warning)
        args.session_id = resumed.id
        return recorded_problem(resumed, resumed.path.with_suffix(".problem.py"), notices), resumed, notices
    try:
        problem = load_problem(args.problem)
    except ProblemError as exc:
        raise RunError(str(exc)) from None
    args.session_id = new_session_id()
    return problem, None, notices


def recorded_problem(session: Session, copy: Path, notices: list[str]) -> Problem:
    """The problem exactly as the session recorded it: its file if unchanged, else the recorded source
    written to `copy` (the workers import problems from files)."""
    recorded = session.header["problem"]
    original = Path(recorded["path"])
    if original.exists():
        on_disk = load_problem(original)
        if on_disk.sha256 == recorded["sha256"]:
            return on_disk
    copy.write_text(recorded["source"])
    why = "was changed" if original.exists() else "is gone"
    notices.append(f"{original} {why} since the session began; using the recorded version ({copy})")
    return parse_problem_source(recorded["source"], copy)


@asynccontextmanager
async def open_run(
    args: argparse.Namespace, progress: ProgressFn | None = None, listener: Listener | None = None
) -> AsyncIterator[Run]:
    """Problem, reference, model, session file and agents; raises RunError or BackendError."""
    problem, resumed, notices = _load(args)
    templates = load_templates(args.prompts)
    with Evaluator(problem, options_from(args)) as evaluator:
        try:
            environment = evaluator.environment  # runs the reference, before any model is loaded
        except ProblemError as exc:
            raise RunError(str(exc)) from None
        except EnvironmentProblem as exc:
            raise RunError(f"cannot evaluate here: {exc}") from None
        backend_config = backend_config_from(args)
        sampling = backend_config.sampling
        async with open_backend(backend_config, progress) as backend:
            path = resumed.path if resumed else Path(args.sessions_dir) / f"{args.session_id}.jsonl"
            header = None if resumed else session_header(problem, args, backend, sampling, templates, environment)
            writer = SessionWriter(path, header)
            try:
                counter, counted_with = token_counter(backend)
                builder = PromptBuilder(templates, problem.source, args.budget, counter, counted_with)
                config = LoopConfig(args.candidates, args.budget, sampling)
                count = resumed.header.get("trajectories", 1) if resumed else args.trajectories
                agents = [
                    Agent(builder, backend, evaluator, templates, writer, config, listener, t) for t in range(count)
                ]
                if resumed:
                    for agent in agents:
                        agent.restore(resumed)
                    writer.write("resume", turn=agents[0].next_number)
                yield Run(problem, evaluator, backend, writer, templates, agents, args.session_id, resumed, notices)
            finally:
                writer.close()


def accept_attempt(run: Run, attempt: Attempt, git_init: bool = False, extra: dict[str, Any] | None = None) -> str:
    """Commit an attempt's kernel beside the problem; the session records the outcome. Raises GitProblem."""
    info = AcceptInfo(
        module=run.problem.path.stem,
        speedup=attempt.correct_speedup,
        device=run.evaluator.device,
        model=run.backend.model,
        session_id=run.session_id,
        turn=attempt.number,
    )
    path = kernel_path_for(run.problem.path)
    try:
        result = KernelRepo.find(path, init=git_init).accept_kernel(path, attempt.code or "", info)
    except GitProblem as exc:
        run.writer.write("accept", turn=attempt.number, commit=None, error=str(exc), **(extra or {}))
        raise
    run.writer.write("accept", turn=attempt.number, commit=result.commit, path=str(path), **(extra or {}))
    notice = f"; {result.notice}" if result.notice else ""
    return f"accepted turn {attempt.number}: {result.commit[:10]} {path}{notice}"
