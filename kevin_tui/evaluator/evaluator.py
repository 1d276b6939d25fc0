"""The evaluator: one problem, many candidates, each judged in its own worker.

This is the caller's side. It never imports torch or the candidate; it drives
a long-lived reference worker (inputs, reference outputs, judging, baseline
timings) and one short-lived candidate worker per candidate, and turns what
they report into a `Verdict`.
"""

from __future__ import annotations

import ast
import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.build import EnvironmentProblem
from kevin_tui.evaluator.sandbox import WorkerGone, WorkerProcess, WorkerTimeout, describe_exit, worker_env
from kevin_tui.evaluator.static_checks import run_static_checks
from kevin_tui.evaluator.timing import TimingPlan
from kevin_tui.evaluator.verdict import Check, Status, Timing, Verdict, Warning_
from kevin_tui.problem import Problem, ProblemError, top_level_names

SUSPICIOUS_SPEEDUP = 10.0
HIDDEN_WORK_RATIO = 2.0
HIDDEN_WORK_MIN_MS = 0.05

ProgressFn = Callable[[str, str], None]


class ReferenceLost(Exception):
    """The reference worker died or hung: not the candidate's verdict, and the next one restarts it."""


def default_cache_dir() -> Path:
    if explicit := os.environ.get("KEVIN_TUI_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kevin-tui"


@dataclass
class EvalOptions:
    device: str = "auto"
    trials: int = 5
    timeout_s: float = 60.0
    build_timeout_s: float = 900.0
    reference_timeout_s: float = 600.0
    strict: bool = False
    seed: int = 42
    timing: bool = True
    timing_trials: int | None = None
    compile_baseline: bool | None = None  # None: on for CUDA, off on CPU
    atol: float | None = None
    rtol: float | None = None
    cache_dir: Path = field(default_factory=default_cache_dir)


def _syntax_verdict(exc: SyntaxError) -> Verdict:
    return Verdict(
        Status.COMPILE_ERROR,
        f"Python syntax error at line {exc.lineno}: {exc.msg}",
        details={"compiler_errors": [{"file": "candidate.py", "line": exc.lineno, "message": exc.msg}]},
    )


def _timing(data: dict[str, Any]) -> dict[str, Timing]:
    return {k: Timing(**v) for k, v in data.items()}


def _median(timings: dict[str, Timing]) -> float:
    return (timings.get("events") or timings["wall"]).median_ms


class Evaluator:
    """Judges candidates for one problem. Use as a context manager; `close()` stops the workers."""

    def __init__(
        self,
        problem: Problem,
        options: EvalOptions | None = None,
        on_progress: ProgressFn | None = None,
        prespawn: bool = True,
    ) -> None:
        """`prespawn` keeps a spare candidate worker with torch imported, for callers that judge many."""
        self.problem = problem
        self.prespawn = prespawn
        self.options = options or EvalOptions()
        self.on_progress = on_progress or (lambda phase, detail: None)
        self.scratch = Path(tempfile.mkdtemp(prefix="kevin-eval-"))
        self.env = worker_env()
        self._reference: WorkerProcess | None = None
        self._spare: tuple[WorkerProcess, Path] | None = None
        self._ready: dict[str, Any] | None = None
        self._reference_timings: dict[str, Any] | None = None
        self._counter = itertools.count(1)
        self.last_log: Path | None = None

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._spare is not None:
            self._spare[0].kill()
            self._spare = None
        if self._reference is not None:
            self._reference.close()
            self._reference = None
        shutil.rmtree(self.scratch, ignore_errors=True)

    @property
    def device(self) -> str:
        return self.reference_ready()["device"]

    @property
    def environment(self) -> dict[str, Any]:
        return self.reference_ready()["environment"]

    # -- reference worker -------------------------------------------------

    def reference_ready(self) -> dict[str, Any]:
        """Start the reference worker once; raise ProblemError if the problem cannot run."""
        if self._ready is not None:
            return self._ready
        self.on_progress("reference", "running the reference")
        scratch = self.scratch / "reference"
        scratch.mkdir(exist_ok=True)
        request = {
            "problem_path": str(self.problem.path.resolve()),
            "device": self.options.device,
            "trials": self.options.trials,
            "seed": self.options.seed,
            "scratch": str(scratch),
        }
        worker = WorkerProcess("reference", request, scratch, scratch / "reference.log", self.env)
        try:
            event = worker.event(self.options.reference_timeout_s)
        except (WorkerTimeout, WorkerGone) as exc:
            tail = worker.log_tail(1500)
            worker.kill()
            raise ProblemError(f"{self.problem.path}: the reference {exc}\n{tail}".rstrip()) from None
        kind = event["event"]
        if kind != "ready":
            worker.kill()
            if kind == "environment_error":
                raise EnvironmentProblem(event["message"])
            raise ProblemError(event["message"])
        self._reference = worker
        self._ready = event
        return event

    def _ask_reference(self, command: dict[str, Any], expect: str) -> dict[str, Any]:
        """One request to the reference worker. If it died or hung, it is dropped (the next candidate
        starts a fresh one) and ReferenceLost says what happened."""
        assert self._reference is not None
        self._reference.send(command)
        try:
            event = self._reference.event(self.options.reference_timeout_s)
        except (WorkerGone, WorkerTimeout) as exc:
            self._reference.kill()
            self._reference, self._ready, self._reference_timings = None, None, None
            raise ReferenceLost(f"the reference worker {exc} while asked to {command['cmd']}") from None
        if event["event"] != expect:
            raise ReferenceLost(f"the reference worker answered {event['event']}: {event.get('message', '')}")
        return event

    def timing_plan(self, device: str) -> dict[str, Any]:
        return asdict(TimingPlan.for_device(device, self.options.timing_trials))

    def reference_timings(self) -> dict[str, Any]:
        if self._reference_timings is None:
            device = self.device
            compile_baseline = self.options.compile_baseline
            if compile_baseline is None:
                compile_baseline = device.startswith("cuda")
            self.on_progress("time", "timing the reference")
            command = {"cmd": "time", "plan": self.timing_plan(device), "compile": compile_baseline}
            self._reference_timings = self._ask_reference(command, "timed")["timings"]
        return self._reference_timings

    # -- candidates -------------------------------------------------------

    def evaluate(self, source: str) -> Verdict:
        """Judge one candidate source. Raises ProblemError / EnvironmentProblem, never for the candidate."""
        started = time.perf_counter()
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            return _syntax_verdict(exc)
        if "ModelNew" not in top_level_names(tree):
            return Verdict(Status.FORMAT_ERROR, "the candidate defines no ModelNew class")
        warnings = run_static_checks(source)
        ready = self.reference_ready()
        verdict = self._run_candidate(source, ready)
        verdict.warnings = warnings + verdict.warnings
        verdict.device = ready["device"]
        verdict.details.setdefault("environment", ready["environment"])
        if self.options.strict and warnings and verdict.status in (Status.CORRECT, Status.COMPILED):
            codes = ", ".join(w.code for w in warnings)
            verdict.details["unstrict_status"] = verdict.status.value
            verdict.status = Status.REJECTED
            verdict.message = f"rejected under --strict: {codes} ({warnings[0].message})"
            verdict.speedup = verdict.speedup_compile = None
        verdict.phases_s["total"] = round(time.perf_counter() - started, 3)
        return verdict

    def _spawn_candidate_worker(self) -> tuple[WorkerProcess, Path]:
        scratch = self.scratch / f"candidate-{next(self._counter)}"
        scratch.mkdir()
        return WorkerProcess("candidate", None, scratch, scratch / "candidate.log", self.env), scratch

    def _take_candidate_worker(self) -> tuple[WorkerProcess, Path]:
        """The spare worker (torch already imported) if it is alive, else a new one."""
        spare, self._spare = self._spare, None
        if spare is not None and spare[0].proc.poll() is None:
            return spare
        if spare is not None:
            spare[0].kill()
        return self._spawn_candidate_worker()

    def _request(self, source: str, scratch: Path, ready: dict[str, Any], build_only: bool = False) -> dict[str, Any]:
        path = scratch / "candidate.py"
        path.write_text(source)
        return {
            "problem_path": str(self.problem.path.resolve()),
            "candidate_path": str(path),
            "inputs_path": ready["inputs_path"],
            "device": ready["device"],
            "seed": self.options.seed,
            "scratch": str(scratch),
            "build_root": str(self.options.cache_dir / "builds"),
            "reference_mutates_inputs": ready["reference_mutates_inputs"],
            "build_only": build_only,
        }

    def prebuild(self, sources: list[str], parallel: int | None = None) -> None:
        """Build several candidates' extensions at once (bounded by CPU cores), so that evaluating
        them one at a time, as the GPU requires, finds them built. Failures are left for evaluate()."""
        ready = self.reference_ready()
        parallel = parallel or max(1, (os.cpu_count() or 2) // 2)
        with ThreadPoolExecutor(parallel, thread_name_prefix="kevin-prebuild") as pool:
            list(pool.map(lambda source: self._build_only(source, ready), sources))

    def _build_only(self, source: str, ready: dict[str, Any]) -> None:
        worker, scratch = self._spawn_candidate_worker()
        worker.send(self._request(source, scratch, ready, build_only=True))
        deadline = time.monotonic() + self.options.build_timeout_s
        try:
            while worker.event(max(0.0, deadline - time.monotonic()))["event"] == "phase":
                continue
        except (WorkerTimeout, WorkerGone):
            pass
        finally:
            worker.kill()

    def _run_candidate(self, source: str, ready: dict[str, Any]) -> Verdict:
        worker, scratch = self._take_candidate_worker()
        self.last_log = worker.log_path
        worker.send(self._request(source, scratch, ready))
        try:
            return _CandidateSession(self, worker).drive()
        finally:
            worker.kill()
            if self.prespawn:  # started only now, so its import never competes with this timing
                self._spare = self._spawn_candidate_worker()


class _CandidateSession:
    """Follows one candidate worker through its phases, enforcing each phase's time limit."""

    def __init__(self, evaluator: Evaluator, worker: WorkerProcess) -> None:
        self.evaluator = evaluator
        self.options = evaluator.options
        self.worker = worker
        self.phase = "build"
        self.phase_started = time.perf_counter()
        self.phases: dict[str, float] = {}
        self.checks: list[Check] = []
        self.builds: list[dict[str, Any]] = []

    def limit(self) -> float:
        return self.options.build_timeout_s if self.phase == "build" else self.options.timeout_s

    def enter(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[self.phase] = round(self.phases.get(self.phase, 0.0) + now - self.phase_started, 3)
        self.phase, self.phase_started = phase, now
        self.evaluator.on_progress(phase, "")

    def next_event(self) -> dict[str, Any]:
        deadline = self.phase_started + self.limit()
        while True:
            event = self.worker.event(max(0.0, deadline - time.perf_counter()))
            if event["event"] != "phase":
                return event
            self.enter(event["phase"])
            deadline = self.phase_started + self.limit()

    def finish(self, verdict: Verdict) -> Verdict:
        self.enter("done")
        verdict.phases_s.update(self.phases)
        verdict.checks = self.checks + verdict.checks
        if self.builds:
            verdict.details.setdefault("builds", self.builds)
        return verdict

    def drive(self) -> Verdict:
        self.evaluator.on_progress("build", "")
        try:
            return self.finish(self._drive())
        except WorkerTimeout:
            self.worker.kill()
            verdict = Verdict(
                Status.TIMEOUT,
                f"no result within {self.limit():.0f} s in the {self.phase} phase; process group killed",
                details={"log": self.worker.log_tail()},
            )
            return self.finish(verdict)
        except WorkerGone as exc:
            verdict = Verdict(
                Status.RUNTIME_ERROR,
                f"the candidate process {describe_exit(exc.returncode)} during the {self.phase} phase",
                details={"log": self.worker.log_tail(), "returncode": exc.returncode},
            )
            return self.finish(verdict)
        except ReferenceLost as exc:
            message = f"{exc}; it is restarted for the next candidate (evaluate this one again)"
            return self.finish(Verdict(Status.RUNTIME_ERROR, message, details={"reference_lost": True}))

    def _drive(self) -> Verdict:
        event = self.next_event()
        self.builds = event.get("builds", [])
        self.checks = [Check(**c) for c in event.get("checks", [])]
        kind = event["event"]
        if kind == "environment_error":
            raise EnvironmentProblem(event["message"])
        if kind == "crash":
            return Verdict(Status.RUNTIME_ERROR, event["message"], details={"traceback": event["traceback"]})
        if kind == "final":
            return Verdict(Status(event["status"]), event["message"], details=event.get("details", {}))
        return self._judge_and_time(event)

    def _judge_and_time(self, checked: dict[str, Any]) -> Verdict:
        self.enter("judge")
        judged = self.evaluator._ask_reference(
            {
                "cmd": "judge",
                "outputs_path": checked["outputs_path"],
                "atol": self.options.atol,
                "rtol": self.options.rtol,
            },
            "judged",
        )
        self.checks += [Check(**c) for c in judged["checks"]]
        if not judged["passed"]:
            return Verdict(Status.INCORRECT, judged["message"], details={"mismatch": judged["mismatch"]})
        if not self.options.timing:
            return Verdict(Status.CORRECT, "correct on every trial (timing skipped)")
        reference = self.evaluator.reference_timings()
        self.worker.send({"cmd": "time", "plan": self.evaluator.timing_plan(self.evaluator.device)})
        event = self.next_event()
        if event["event"] == "final":
            return Verdict(Status(event["status"]), event["message"], details=event.get("details", {}))
        if event["event"] == "crash":
            return Verdict(Status.RUNTIME_ERROR, event["message"], details={"traceback": event["traceback"]})
        self.checks.append(Check("nothing replaced or left running while timing", True))
        return speed_verdict(_timing(event["timings"]), reference)


def speed_verdict(candidate: dict[str, Timing], reference: dict[str, Any]) -> Verdict:
    eager = _timing(reference["eager"])
    warnings: list[Warning_] = []
    cand_ms, ref_ms = _median(candidate), _median(eager)
    if "events" in candidate:
        cand_gap = candidate["synced_wall"].median_ms - candidate["events"].median_ms
        ref_gap = eager["synced_wall"].median_ms - eager["events"].median_ms
        if cand_gap > HIDDEN_WORK_RATIO * max(ref_gap, 0.0) + HIDDEN_WORK_MIN_MS:
            warnings.append(Warning_(
                "hidden_stream_work",
                f"with a device-wide sync the candidate takes {candidate['synced_wall'].median_ms:.3f} ms, "
                f"not {cand_ms:.3f} ms: work escapes the timed stream; speedups use device-synced times",
            ))  # fmt: skip
            cand_ms, ref_ms = candidate["synced_wall"].median_ms, eager["synced_wall"].median_ms
    verdict = Verdict(Status.CORRECT, "")
    verdict.timings = {f"candidate_{k}": v for k, v in candidate.items()} | {
        f"reference_{k}": v for k, v in eager.items()
    }
    verdict.candidate_ms, verdict.reference_ms = cand_ms, ref_ms
    verdict.speedup = ref_ms / cand_ms if cand_ms > 0 else None
    if "compile" in reference:
        compiled = _timing(reference["compile"])
        verdict.timings |= {f"reference_compile_{k}": v for k, v in compiled.items()}
        verdict.reference_compile_ms = _median(compiled)
        verdict.speedup_compile = verdict.reference_compile_ms / cand_ms if cand_ms > 0 else None
    elif "compile_error" in reference:
        warnings.append(
            Warning_("compile_baseline_failed", f"torch.compile baseline failed: {reference['compile_error']}")
        )
    if verdict.speedup and verdict.speedup > SUSPICIOUS_SPEEDUP:
        warnings.append(Warning_(
            "suspicious_speedup",
            f"{verdict.speedup:.1f}x over eager is unusually high: check the kernel really does the work",
        ))  # fmt: skip
    verdict.warnings = warnings
    speed = f"{verdict.speedup:.2f}x vs eager" if verdict.speedup else "speedup unknown"
    verdict.message = f"correct, {speed} ({cand_ms:.3f} ms vs {ref_ms:.3f} ms)"
    return verdict
