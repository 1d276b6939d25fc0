"""Running a batch: Kevin's evaluation protocol (k trajectories of n turns per problem) over many
problems, with one backend, as a pipeline.

One backend serves every problem (a managed vLLM server is started once). Problems are opened a
few at a time (their reference runs on the evaluation device they are placed on); each of their
trajectories is a driver of its own (kevin_tui.driver) writing its own session file, sent the
same intent as headless mode, one turn at a time; the drivers share the gates of
kevin_tui.batch.scheduling, so replies stream concurrently up to --concurrency, kernels build in
parallel, and each device times one kernel at a time while the others generate and build.

Nothing is lost to a kill: every session is written event by event and the manifest by rename, and
--resume continues each trajectory where its session ends. A problem whose reference cannot run
is recorded as skipped, with why, and the run goes on; a machine that cannot evaluate at all, or a
model that cannot start, stops it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from kevin_tui.batch.manifest import Manifest, ProblemEntry, RunDirectoryError, source_sha256
from kevin_tui.batch.progress import Progress
from kevin_tui.batch.results import load_run
from kevin_tui.batch.scheduling import Lanes
from kevin_tui.config import BatchConfig, ProblemConfig, RunConfig
from kevin_tui.device_gate import Gate
from kevin_tui.devices import resolve_device
from kevin_tui.driver import Driver, Report
from kevin_tui.errors import KevinError
from kevin_tui.evaluator import EnvironmentProblem, Evaluator
from kevin_tui.judge import JudgeFactory
from kevin_tui.models.base import Backend, BackendError, Sampling
from kevin_tui.models.factory import BackendConfig, launch_record, open_backend
from kevin_tui.models.registry import kind_named
from kevin_tui.protocol.templates import load_templates, prompts_change
from kevin_tui.run import ProblemScope, RunError, open_problem
from kevin_tui.session import Session, SessionError, load_session

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_CANNOT_EVALUATE_HERE = 4


# -- the protocol, as the manifest keeps it ----------------------------------------------


def protocol_of(config: BatchConfig) -> dict[str, Any]:
    """What makes two runs comparable: recorded at the start, taken back by --resume."""
    evaluation = {k: v for k, v in asdict(config.problem.evaluation).items() if k not in ("device", "cache_dir")}
    templates = load_templates(config.problem.prompts)
    return {
        "trajectories": config.problem.trajectories, "turns": config.turns, "model": config.backend.label(),
        "sampling": asdict(config.backend.sampling), "budget": config.problem.budget,
        "prompts": str(config.problem.prompts) if config.problem.prompts else None, "evaluation": evaluation,
        "prompts_version": templates.version, "prompts_files": templates.fingerprints,
        "launch": launch_record(config.backend),
    }  # fmt: skip


def resumed_config(config: BatchConfig, manifest: Manifest) -> BatchConfig:
    """The run's own protocol with this command's backend, devices and limits; refused when its prompt set
    changed since (a run's turns share one)."""
    protocol = manifest.protocol
    evaluation = replace(config.problem.evaluation, **protocol["evaluation"])
    problem = replace(
        config.problem, trajectories=protocol["trajectories"], budget=protocol["budget"],
        prompts=Path(protocol["prompts"]) if protocol["prompts"] else None, evaluation=evaluation,
    )  # fmt: skip
    recorded = protocol.get("prompts_version", ""), protocol.get("prompts_files")
    if change := prompts_change(*recorded, load_templates(problem.prompts)):
        raise RunDirectoryError(f"{manifest.directory}: {change}; restore them to resume this run, or start a new "
                                "one (--out)")  # fmt: skip
    scripted = config.backend.backend != "auto" and kind_named(config.backend.backend).capabilities.scripted
    model = config.backend.model if scripted else protocol["model"]
    backend = replace(config.backend, model=model, sampling=Sampling(**protocol["sampling"]))
    return replace(config, backend=backend, problem=problem, turns=protocol["turns"])


# -- the runner ---------------------------------------------------------------------------


@dataclass
class Placement:
    """What the run needs to evaluate: the devices, which of them the model shares, the judge."""

    devices: list[str]
    shared: set[str]
    judge: JudgeFactory
    remote: bool
    close: Callable[[], None] = lambda: None


class BatchRunner:
    def __init__(self, config: BatchConfig, manifest: Manifest, progress: Progress, placement: Placement) -> None:
        self.config = config
        self.manifest = manifest
        self.progress = progress
        self.placement = placement
        self.incomplete = 0  # trajectories a model failure stopped (their sessions are kept)

    @property
    def open_limit(self) -> int:
        if self.config.open_problems:
            return self.config.open_problems
        trajectories = self.config.problem.trajectories
        filling = -(-self.config.concurrency // trajectories) + 1  # enough trajectories to fill the slots
        return max(filling, len(self.placement.devices))

    async def run(self) -> int:
        config = self.config
        build_jobs = config.build_jobs or os.cpu_count() or 1
        lanes = Lanes(config.concurrency, build_jobs, self.placement.devices, self.placement.shared,
                      self.placement.remote)  # fmt: skip
        # blocking steps (prompt counting, builds, evaluations, Ray calls) run in threads: enough for all
        threads = self.open_limit * config.problem.trajectories + build_jobs + len(self.placement.devices) + 8
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(threads, "kevin-batch"))
        todo = [p for p in self.manifest.problems if p.state != "done"]
        limit = asyncio.Semaphore(self.open_limit)
        async with open_backend(config.backend, self.progress.on_model) as backend:
            try:
                async with asyncio.TaskGroup() as group:
                    for entry in todo:
                        group.create_task(self._problem(entry, backend, lanes, limit))
            except* KevinError as failed:  # one that stops the whole run
                raise failed.exceptions[0] from None
        return EXIT_INCOMPLETE if self.incomplete else EXIT_OK

    def _problem_config(self, entry: ProblemEntry, device: str) -> ProblemConfig:
        evaluation = self.config.problem.evaluation
        if not self.placement.remote:  # Ray places each task on a device itself
            evaluation = replace(evaluation, device=device)
        return replace(self.config.problem, problem=Path(entry.path), resume=None, sessions_dir=self.manifest.sessions,
                       trajectories=1, candidates=1, evaluation=evaluation)  # fmt: skip

    async def _problem(self, entry: ProblemEntry, backend: Backend, lanes: Lanes, limit: asyncio.Semaphore) -> None:
        sessions = [self._session(entry, j) for j in range(self.config.problem.trajectories)]
        if all(s is not None and s.state == "finished" for s in sessions):
            self.manifest.mark(entry.key, "done")
            return
        async with limit:
            device = lanes.place()
            try:
                changed = self._changed(entry)
                if changed:
                    raise RunError(changed)
                async with open_problem(self._problem_config(entry, device), None, self.placement.judge) as scope:
                    self.manifest.mark(entry.key, "running")
                    self.progress.opened(entry.key, device)
                    for notice in scope.notices:
                        self.progress.say(f"{entry.key}: {notice}", "yellow")
                    complete = await self._trajectories(entry, scope, backend, lanes.gate(device), sessions)
                if complete:
                    self.manifest.mark(entry.key, "done")
                    self.progress.finished(entry.key)
            except EnvironmentProblem as exc:  # this machine, not this problem
                raise RunError(f"cannot evaluate here: {exc}", EXIT_CANNOT_EVALUATE_HERE) from None
            except RunError as exc:
                if exc.exit_code == EXIT_CANNOT_EVALUATE_HERE:
                    raise
                self._skip(entry, str(exc))
            except BackendError:
                raise
            except KevinError as exc:  # the problem file or its reference
                self._skip(entry, str(exc))
            finally:
                lanes.release(device)

    def _skip(self, entry: ProblemEntry, reason: str) -> None:
        self.manifest.mark(entry.key, "skipped", reason)
        self.progress.skip(entry.key, reason)

    def _changed(self, entry: ProblemEntry) -> str | None:
        """Why the problem may not be worked on any more: its file changed since the run began."""
        try:
            sha256 = source_sha256(entry.path)
        except KevinError as exc:
            return str(exc)
        return None if sha256 == entry.sha256 else f"{entry.path} changed since the run began"

    def _session(self, entry: ProblemEntry, trajectory: int) -> Session | None:
        path = self.manifest.session_path(entry.key, trajectory)
        if not path.exists():
            return None
        try:
            return load_session(path)
        except SessionError as exc:
            raise RunDirectoryError(f"cannot resume: {exc}") from None

    async def _trajectories(
        self, entry: ProblemEntry, scope: ProblemScope, backend: Backend, gate: Gate, sessions: list[Session | None]
    ) -> bool:
        """Every unfinished trajectory of one problem, side by side; True when all are finished."""
        async with AsyncExitStack() as stack:
            drivers = []
            for index, session in enumerate(sessions):
                if session is not None and session.state == "finished":
                    continue
                mine = replace(scope, session_id=self.manifest.session_id(entry.key, index), resumed=session)
                run_config = RunConfig(backend=trajectory_backend(self.config, index), problem=scope.config)

                def report(item: Report, key: str = entry.key) -> None:
                    self.progress.on_report(key, item)

                driver = await stack.enter_async_context(Driver.attach(run_config, report, mine, backend, gate))
                drivers.append(driver)
            finished = await asyncio.gather(*(self._trajectory(entry.key, d) for d in drivers))
        return all(finished)

    async def _trajectory(self, key: str, driver: Driver) -> bool:
        """The protocol's turns for one trajectory (those its session does not have yet), then its end."""
        latest = driver.tracks[0].latest
        done = latest.number if latest else 0
        try:
            for _ in range(self.config.turns - done):
                await driver.advance()
            await driver.finish()
        except BackendError as exc:
            self.incomplete += 1
            self.progress.say(f"{key}: {exc} (the session is kept; --resume continues it)", "red")
            return False
        return True


def trajectory_backend(config: BatchConfig, trajectory: int) -> BackendConfig:
    """Trajectories are independent samples: with a sampling seed, trajectory j samples with seed + j
    (one seed for all would make them one trajectory, k times)."""
    sampling = config.backend.sampling
    if sampling.seed is None:
        return config.backend
    return replace(config.backend, sampling=replace(sampling, seed=sampling.seed + trajectory))


def placement(config: BatchConfig) -> Placement:
    """Where kernels are judged: the devices given (here), or Ray tasks."""
    devices = [d if config.ray else resolve_device(d) for d in config.eval_devices]
    if len(set(devices)) != len(devices):
        raise RunDirectoryError(f"--eval-devices names a device twice: {', '.join(config.eval_devices)}")
    if config.ray:
        from kevin_tui.batch.remote import ray_judge

        judge, close = ray_judge(config.ray)
        return Placement(["ray"], set(), judge, remote=True, close=close)
    kind = config.backend.resolve()
    shared = set() if config.eval_while_generating else kind.devices(config.backend)
    return Placement(devices, shared & set(devices), Evaluator, remote=False)


def start_manifest(config: BatchConfig) -> Manifest:
    if config.resume:
        return Manifest.load(config.out)
    return Manifest.create(config.out, protocol_of(config), list(config.problems))


def progress_so_far(progress: Progress, directory: Path) -> None:
    outcome = load_run(directory)
    kernels = [k for p in outcome.problems for t in p.trajectories for k in t.kernels]
    best = {p.key: max(k.gain() for t in p.trajectories for k in t.kernels if k.correct)
            for p in outcome.problems if any(k.correct for t in p.trajectories for k in t.kernels)}  # fmt: skip
    done = sum(p.state == "done" for p in outcome.problems)
    progress.resumed(len(kernels), sum(k.correct for k in kernels), best, done)


async def run_batch(config: BatchConfig) -> tuple[int, Manifest]:
    """Start or resume the run; returns the exit code and the manifest."""
    manifest = start_manifest(config)
    if config.resume:
        config = resumed_config(config, manifest)
    where = placement(config)
    progress = Progress(len(manifest.problems), config.problem.trajectories, config.turns)
    progress_so_far(progress, manifest.directory)
    progress.say(f"batch run in {manifest.directory}: {len(manifest.problems)} problems x "
                 f"{config.problem.trajectories} trajectories x {config.turns} turns; evaluation on "
                 f"{'Ray' if where.remote else ', '.join(where.devices)}")  # fmt: skip
    runner = BatchRunner(config, manifest, progress, where)
    try:
        async with progress.shown(config.live, config.progress_every):
            code = await runner.run()
    finally:
        where.close()
    return code, manifest
