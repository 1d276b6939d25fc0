"""The evaluator: one problem, many candidates, each judged in its own sandboxed worker.

This is the caller's side. It never imports torch or a candidate. It keeps a long-lived reference
worker (inputs, reference outputs, the judge, the reference's timing rounds), a build broker, and
one short-lived candidate worker per candidate, and turns what it can check into a `Verdict`.
"""

from __future__ import annotations

import ast
import functools
import itertools
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.evidence import expect, run_all
from kevin_tui.evaluator.host.builds import BuildBroker
from kevin_tui.evaluator.host.candidate_run import CandidateRun, Decided, ReferenceLost
from kevin_tui.evaluator.host.later import CandidateEvidence
from kevin_tui.evaluator.host.ncu import find_ncu, ncu_pass
from kevin_tui.evaluator.host.sandbox import Bind, Limits, SandboxUnavailable, choose, worker_env
from kevin_tui.evaluator.host.sanitizer import apply as apply_sanitizer
from kevin_tui.evaluator.host.sanitizer import find_sanitizer, sanitize_pass, tools_for
from kevin_tui.evaluator.host.scratch import WorkerFiles, given_dir, make_scratch
from kevin_tui.evaluator.host.speed_of_light import Bound, Peaks, cached_cpu_peaks, cpu_key, gpu_peaks, store_cpu_peaks
from kevin_tui.evaluator.host.static_checks import run_static_checks, uses_triton
from kevin_tui.evaluator.host.workers import Arrived, WorkerGone, WorkerProcess, WorkerTimeout, kill_workers_under
from kevin_tui.evaluator.protocol import COMPILE_SEED, ProtocolViolation
from kevin_tui.evaluator.verdict import EnvironmentProblem, Status, Verdict, Warning_
from kevin_tui.problem import Problem, ProblemError, top_level_names

ProgressFn = Callable[[str, str], None]
# Findings of the run, not of the source, that --strict rejects like a static one: a kernel the host never
# built, a much larger error against float64 than the reference's own, and PyTorch compute dispatched inside
# forward (what the static check's name lists miss, e.g. `nn.ReLU()(x)`, seen as it ran).
STRICT_RUNTIME = ("no_custom_kernel", "lower_precision", "torch_compute_at_runtime")


def default_cache_dir() -> Path:
    if explicit := os.environ.get("KEVIN_TUI_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kevin-tui"


@dataclass(frozen=True)  # built once, at the command line's edge (kevin_tui.arguments)
class EvalOptions:
    device: str = "auto"
    trials: int = 5
    timeout_s: float = 60.0
    build_timeout_s: float = 900.0
    reference_timeout_s: float = 600.0
    strict: bool = False
    seed: int | None = None  # None: a fresh secret per evaluator (recorded in each verdict)
    timing: bool = True
    timing_trials: int | None = None
    compile_baseline: bool | None = None  # None: on for CUDA, off on CPU
    compiled: bool = False  # also judge the candidate's ModelNew under torch.compile (host/compiled.py)
    atol: float | None = None
    rtol: float | None = None
    near_duplicates: bool = True
    # Evidence after a correct verdict (the command line turns both on; a library caller chooses):
    profile: bool = False  # a torch.profiler digest of one call, and custom-kernel coverage
    ncu: str = "off"  # with profile, on CUDA: an Nsight Compute digest ("auto", "off" or ncu's path)
    shapes: str = "off"  # other input sizes: "off", "warn" or "strict"
    # compute-sanitizer on CUDA: "off", "accept" (every tool, when a kernel is accepted) or a comma list of
    # tools run after every correct verdict (host/sanitizer.py)
    sanitize: str = "off"
    sandbox: str = "auto"
    memory_limit: int | None = None  # bytes per worker; None: half the machine's memory
    peaks: dict[str, dict] | None = None  # device name -> {bandwidth_gbs, fp32_tflops, tensor_tflops}
    cache_dir: Path = field(default_factory=default_cache_dir)


def worker_threads() -> int:
    """CPU threads per worker: half the cores, since the reference and a candidate are alive at once."""
    return max(1, (os.cpu_count() or 2) // 2)


def _syntax_verdict(exc: SyntaxError) -> Verdict:
    return Verdict(
        Status.COMPILE_ERROR,
        f"Python syntax error at line {exc.lineno}: {exc.msg}",
        details={"compiler_errors": [{"file": "candidate.py", "line": exc.lineno, "message": exc.msg}]},
    )


def runtime_evidence(verdict: Verdict, static: list[Warning_], source: str) -> list[Warning_]:
    """What the run showed about the kernel: no extension built after all, PyTorch ops dispatched."""
    if verdict.status is not Status.CORRECT:
        return []
    found = []
    codes = {w.code for w in static}
    if not verdict.details.get("builds") and "no_custom_kernel" not in codes and not uses_triton(source):
        found.append(Warning_("no_custom_kernel", "no extension was built while loading the candidate: the load_inline "
                              "call never ran"))  # fmt: skip
    if ops := verdict.details.get("op_counts"):
        listed = ", ".join(f"{n} {name}" for name, n in sorted(ops.items(), key=lambda item: -item[1])[:5])
        found.append(Warning_("torch_compute_at_runtime", f"forward dispatched PyTorch compute ops: {listed}"))
    return found


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
        try:
            self.sandbox = choose(self.options.sandbox)
        except SandboxUnavailable as exc:
            raise EnvironmentProblem(str(exc)) from None
        self.scratch = make_scratch()
        self.inbox = self.scratch / "inbox"
        self.inbox.mkdir()
        self.inbox_files = WorkerFiles(self.inbox)
        self.outbox_files: WorkerFiles | None = None  # the reference worker's outbox, once it runs
        self.env = worker_env()
        self.limits = Limits(memory=self.options.memory_limit) if self.options.memory_limit else Limits()
        self.init_seed = self.options.seed if self.options.seed is not None else secrets.randbits(31)
        self.broker = BuildBroker(self.options.cache_dir / "builds", self.sandbox, self.env, self.limits, self.scratch)
        self.reference: WorkerProcess | None = None
        self.closed = False
        self._ready: dict[str, Any] | None = None
        self._spare: tuple[WorkerProcess, Path] | None = None
        self.counter = itertools.count(1)
        self._bound: Bound | None = None
        self._candidate_log: Path | None = None

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def last_log(self) -> Path | None:
        """What the app shows under the build phase: the running builder's stamped stages, else the
        latest candidate worker's log."""
        return self.broker.last_log or self._candidate_log

    def close(self) -> None:
        """Stop every worker at once, in-flight builds and runs included (a thread still waiting on one
        gets WorkerGone and returns), the reference too: it holds nothing that needs saving."""
        self.closed = True
        self._spare, self.reference = None, None
        kill_workers_under(self.scratch)
        shutil.rmtree(self.scratch, ignore_errors=True)

    @property
    def device(self) -> str:
        return self.reference_ready()["device"]

    @property
    def environment(self) -> dict[str, Any]:
        return {**self.reference_ready()["environment"], "sandbox": self.sandbox.describe()}

    @property
    def versions(self) -> dict[str, Any]:
        environment = self.reference_ready()["environment"]
        return {"torch": environment.get("torch"), "cuda": environment.get("cuda")}

    def bound(self) -> Bound | None:
        """The least time the problem can take here (None when the device's figures are unknown)."""
        ready = self.reference_ready()
        if self._bound is not None:
            return self._bound
        if ready["device"].startswith("cuda"):
            peaks = gpu_peaks(ready["environment"].get("gpu", ""), self.options.peaks)
        else:
            cache, key = self.options.cache_dir / "machine.json", cpu_key(ready["threads"])
            peaks = cached_cpu_peaks(cache, key)
            if peaks is None:
                measured = self.ask_reference({"cmd": "measure_peaks"}, "peaks")
                rate = measured["fp32_tflops"]
                peaks = Peaks(measured["bandwidth_gbs"], rate, rate, "measured on this CPU (copy and matmul)")
                store_cpu_peaks(cache, key, peaks)
        if peaks is not None:
            self._bound = Bound(ready["flops"], ready["work_bytes"], peaks)
        return self._bound

    def speed_of_light_line(self) -> str | None:
        """The bound as one line for the model's first prompt."""
        bound = self.bound()
        return bound.line() if bound else None

    def compile_baseline(self) -> bool:
        wanted = self.options.compile_baseline
        return self.device.startswith("cuda") if wanted is None else wanted

    # -- the reference worker -------------------------------------------------------

    def reference_ready(self) -> dict[str, Any]:
        """Start the reference worker once; raise ProblemError if the problem cannot run."""
        if self._ready is not None:
            return self._ready
        self.on_progress("reference", "running the reference")
        scratch = self.scratch / "reference"
        outbox = scratch / "outbox"
        outbox.mkdir(parents=True, exist_ok=True)
        compiled = self.compile_cache()
        binds = [Bind(str(self.problem.path.resolve().parent)), Bind(str(self.inbox)), Bind(str(compiled), True)]
        env = {**self.env, "TORCHINDUCTOR_CACHE_DIR": str(compiled), "TRITON_CACHE_DIR": str(compiled / "triton")}
        worker = WorkerProcess("reference", scratch, env, self.sandbox, binds, self.limits)
        self.outbox_files = WorkerFiles(outbox)
        worker.send({
            "problem_path": str(self.problem.path.resolve()), "device": self.options.device, "cmd": "init",
            "init_seed": self.init_seed, "outbox": str(outbox), "threads": worker_threads(),
            "warm_compile": self.options.compiled,
        })  # fmt: skip
        try:
            event = worker.event(self.options.reference_timeout_s)
        except (WorkerTimeout, WorkerGone, ProtocolViolation) as exc:
            tail = worker.log_tail(1500)
            worker.kill()
            raise ProblemError(f"{self.problem.path}: the reference {exc}\n{tail}".rstrip()) from None
        kind = event["event"]
        if kind != "ready":
            worker.kill()
            if kind == "environment_error":
                raise EnvironmentProblem(event["message"])
            raise ProblemError(event["message"])
        self.reference, self._ready = worker, event
        return event

    def compile_cache(self) -> Path:
        """torch.compile's caches (inductor, Triton), shared by every reference worker on this machine so
        that the compile baseline is compiled once per problem, not once per evaluator. Only reference
        workers, which run no candidate code, may write there; candidate workers do not see it (theirs
        stays private in their sandbox's /tmp), so no candidate can plant code the baseline then runs.
        Under --compiled they see it read-only and copy it into their own /tmp (a cache shared between
        candidates would make one's compiled run depend on what another left there: a fake implementation
        that lies passed on the honest one's cached graph)."""
        path = self.options.cache_dir / "compiled"
        (path / "triton").mkdir(parents=True, exist_ok=True)
        return path

    def _drop_reference(self) -> None:
        if self.reference is not None:
            self.reference.kill()
        self.reference, self._ready = None, None

    def await_reference(self, expect: str) -> Arrived:
        """The reference's next event, which must be `expect`; if it died or hung it is dropped (the next
        candidate starts a fresh one) and ReferenceLost says what happened."""
        assert self.reference is not None
        try:
            arrived = self.reference.arrival(self.options.reference_timeout_s)
        except (WorkerGone, WorkerTimeout, ProtocolViolation) as exc:
            self._drop_reference()
            raise ReferenceLost(f"the reference worker {exc} while asked for {expect}") from None
        if arrived.event["event"] != expect:
            message = arrived.event.get("message", "")
            self._drop_reference()
            raise ReferenceLost(f"the reference worker answered {arrived.event['event']} {message}".rstrip())
        return arrived

    def ask_reference(self, command: dict[str, Any], expect: str) -> dict[str, Any]:
        self.reference_ready()
        self.tell_reference(command)
        return self.await_reference(expect).event

    def tell_reference(self, command: dict[str, Any]) -> float:
        """Send the running reference a command; when it was sent (perf_counter)."""
        assert self.reference is not None, "the reference is started before anything is asked of it"
        return self.reference.send(command)

    # -- candidates ---------------------------------------------------------------------

    def evaluate(self, source: str) -> Verdict:
        """Judge one candidate source, its evidence included. Raises ProblemError / EnvironmentProblem,
        never for the candidate."""
        return run_all(*self.judge(source))

    def judge(self, source: str) -> tuple[Verdict, CandidateEvidence | None]:
        """The verdict as soon as judging and timing are done, and the evidence still to run for it (a
        correct verdict's profile, other sizes, ncu digest: see kevin_tui/evaluator/evidence.py)."""
        started = time.perf_counter()
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            return self._stamp(_syntax_verdict(exc), started), None
        if "ModelNew" not in top_level_names(tree):
            verdict = Verdict(Status.FORMAT_ERROR, "the candidate defines no ModelNew class")
            return self._stamp(verdict, started), None
        warnings = run_static_checks(source)
        ready = self.reference_ready()
        verdict, later = self._run_candidate(source)
        verdict.warnings = warnings + runtime_evidence(verdict, warnings, source) + verdict.warnings
        verdict.device = ready["device"]
        verdict.details.setdefault("environment", ready["environment"])
        found = warnings + [w for w in verdict.warnings if w.code in STRICT_RUNTIME and w not in warnings]
        if self.options.strict and found and verdict.status in (Status.CORRECT, Status.COMPILED):
            codes = ", ".join(dict.fromkeys(w.code for w in found))
            verdict.details["unstrict_status"] = verdict.status.value
            verdict.status = Status.REJECTED
            verdict.message = f"rejected under --strict: {codes} ({found[0].message})"
            verdict.speedup = verdict.speedup_compile = verdict.speedup_interval = None
        if later is not None and verdict.status is not Status.CORRECT:  # rejected under --strict: no evidence
            later.close()
            later = None
        expect(verdict, later.parts if later else [])
        return self._stamp(verdict, started), later

    def _stamp(self, verdict: Verdict, started: float) -> Verdict:
        verdict.sandbox = self.sandbox.describe()
        verdict.phases_s["total"] = round(time.perf_counter() - started, 3)
        return verdict

    def spawn_candidate_worker(
        self,
        scratch: Path | None = None,
        prefix: Sequence[str] = (),
        extra_binds: Sequence[Bind] = (),
        extra_env: Mapping[str, str] | None = None,
    ) -> tuple[WorkerProcess, Path]:
        """A candidate worker that sees its scratch, and read-only a private copy of the problem file and the
        libraries built for it (see given_dir); `prefix`, `extra_binds` and `extra_env`: a tool it runs under
        (Nsight Compute, compute-sanitizer), that tool's files and what the tool needs set."""
        scratch = scratch or self.scratch / f"candidate-{next(self.counter)}"
        given = given_dir(scratch)
        given.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.problem.path, given / self.problem.path.name)
        binds = [Bind(str(given)), *extra_binds]
        env = {**self.env, **(extra_env or {})}
        if self.options.compiled:  # read-only: the worker starts its own cache, in its private /tmp, from a copy
            binds.append(Bind(str(self.compile_cache())))
            env[COMPILE_SEED] = str(self.compile_cache())
        return WorkerProcess("candidate", scratch, env, self.sandbox, binds, self.limits, prefix), scratch

    def _take_candidate_worker(self) -> tuple[WorkerProcess, Path]:
        """The spare worker (torch already imported) if it is alive, else a new one."""
        spare, self._spare = self._spare, None
        if spare is not None and spare[0].alive():
            return spare
        if spare is not None:
            spare[0].kill()
        return self.spawn_candidate_worker()

    def _run_candidate(self, source: str) -> tuple[Verdict, CandidateEvidence | None]:
        worker, scratch = self._take_candidate_worker()
        self._candidate_log = worker.log_path
        self.broker.last_log = None
        run = CandidateRun(self, worker, scratch, source, evaluation=next(self.counter))
        run.files.write("candidate.py", source.encode())
        done = functools.partial(self._candidate_done, run, threading.Event())
        try:
            verdict = run.drive()
            if verdict.status is Status.CORRECT and (tools := tools_for(self.options.sanitize, at_accept=False)):
                apply_sanitizer(verdict, self.sanitize(source, tools))
        except BaseException:
            done()
            raise
        parts = run.evidence_parts() + (["ncu"] if self._nsight_wanted() else [])
        if verdict.status is not Status.CORRECT or not parts:
            done()
            return verdict, None
        return verdict, CandidateEvidence(self, run, parts, done)

    def _candidate_done(self, run: CandidateRun, once: threading.Event, spare: bool = True) -> None:
        """The candidate's worker is finished with (after its verdict, or its evidence): killed, and the
        spare started, only now, so its import never competes with a timing."""
        run.worker.kill()
        if once.is_set():
            return
        once.set()
        run.worker.empty_scratch(keep=("in-0.kt",))  # the first trial's inputs: what the profiling tools run on
        if spare and self.prespawn and not self.closed and self._spare is None:
            self._spare = self.spawn_candidate_worker()

    def _nsight_wanted(self) -> bool:
        return self.options.profile and self.options.ncu != "off" and self.device.startswith("cuda")

    def nsight(
        self, found: Verdict, candidate_files: WorkerFiles, source: str, scratch: Path, progress: bool = True
    ) -> None:
        """Nsight Compute's digest of the kernels of one call of a correct CUDA kernel, as evidence, with the
        profile (see host/ncu.py), in `scratch`."""
        if (tool := find_ncu(self.options.ncu)) is None:
            found.evidence["ncu"] = {"skipped": "ncu not found (install Nsight Compute, or pass --ncu PATH)"}
            return
        if progress:
            self.on_progress("ncu", "profiling the kernels with Nsight Compute")
        started = time.perf_counter()
        try:
            inputs = candidate_files.read(str(candidate_files.path("in-0.kt")), "in-0.kt")
        except ProtocolViolation as exc:
            found.evidence["ncu"] = {"skipped": f"the first trial's inputs are gone: {exc}"}
            return
        found.evidence["ncu"] = ncu_pass(self, tool, inputs, source, scratch)
        found.phases_s["ncu"] = round(time.perf_counter() - started, 3)

    def sanitize(self, source: str, tools: Sequence[str]) -> dict[str, Any]:
        """One forward call of `source` under each compute-sanitizer tool, on fresh inputs from the reference
        (host/sanitizer.py): `{"tools": {tool: {"findings": [...]}}}`, or `{"skipped": why}`."""
        if not self.device.startswith("cuda"):
            return {"skipped": f"compute-sanitizer checks CUDA kernels; the device here is {self.device}"}
        if (tool := find_sanitizer()) is None:
            return {"skipped": "compute-sanitizer not found (it ships with the CUDA toolkit: set CUDA_HOME, or put "
                    "it on PATH; --sanitize off to skip)"}  # fmt: skip
        self.on_progress("sanitize", f"compute-sanitizer {', '.join(tools)}")
        started = time.perf_counter()
        paths = self.ask_reference(
            {"cmd": "trials", "eval": next(self.counter), "seed": secrets.randbits(62), "fresh": 1, "duplicates": 0},
            "trials_ready",
        )["paths"]
        result = sanitize_pass(self, tool, tuple(tools), Path(paths[0]), source)
        result["seconds"] = round(time.perf_counter() - started, 3)
        return result

    def prebuild(self, sources: list[str], parallel: int | None = None) -> None:
        """Build several candidates' extensions at once (bounded by CPU cores), so that evaluating
        them one at a time, as the GPU requires, finds them built. Failures are left for evaluate()."""
        self.reference_ready()
        parallel = parallel or max(1, (os.cpu_count() or 2) // 2)
        with ThreadPoolExecutor(parallel, thread_name_prefix="kevin-prebuild") as pool:
            list(pool.map(self._build_only, sources))

    def _build_only(self, source: str) -> None:
        worker, scratch = self.spawn_candidate_worker()
        run = CandidateRun(self, worker, scratch, source)
        run.files.write("candidate.py", source.encode())
        try:
            run.load()
        except (Decided, WorkerGone, WorkerTimeout, ProtocolViolation, ReferenceLost):
            pass
        finally:
            worker.kill()
