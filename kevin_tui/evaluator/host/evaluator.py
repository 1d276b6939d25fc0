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
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.compiler_output import PARSE_ERRORS
from kevin_tui.evaluator.evidence import expect, run_all
from kevin_tui.evaluator.host.builds import BuildBroker
from kevin_tui.evaluator.host.candidate_run import Decided, HostRun, RunContext
from kevin_tui.evaluator.host.decisions import Finding, decide, overrule
from kevin_tui.evaluator.host.later import CandidateEvidence
from kevin_tui.evaluator.host.ncu import find_ncu, ncu_pass
from kevin_tui.evaluator.host.options import EvalOptions, spare_count
from kevin_tui.evaluator.host.reference import ReferenceLost, ReferenceWorker
from kevin_tui.evaluator.host.sandbox import Bind, Limits, SandboxUnavailable, choose, worker_env
from kevin_tui.evaluator.host.sanitizer import apply as apply_sanitizer
from kevin_tui.evaluator.host.sanitizer import find_sanitizer, sanitize_pass, tools_for
from kevin_tui.evaluator.host.scratch import WorkerFiles, given_dir, make_scratch, remove_tree
from kevin_tui.evaluator.host.static_checks import run_static_checks, uses_triton
from kevin_tui.evaluator.host.workers import WorkerGone, WorkerProcess, WorkerTimeout, kill_workers_under
from kevin_tui.evaluator.protocol import COMPILE_SEED, WITH_DYNAMO, ProtocolViolation, compile_baseline_on
from kevin_tui.evaluator.verdict import EnvironmentProblem, Status, Verdict, Warning_
from kevin_tui.problem import Problem, top_level_names

ProgressFn = Callable[[str, str], None]
# Findings of the run, not of the source, that --strict rejects like a static one: a kernel the host never
# built, a much larger error against float64 than the reference's own, PyTorch compute dispatched inside
# forward (what the static check's name lists miss, e.g. `nn.ReLU()(x)`, seen as it ran), an op count that could
# not see all of forward (threads or processes of the candidate's beside it, no count, a failure under it), and
# PyTorch compute in the C++/CUDA text the host built (sources made at runtime, which the static checks cannot read).
STRICT_RUNTIME = (
    "no_custom_kernel", "lower_precision", "torch_compute_at_runtime", "torch_compute_in_extension", "ops_unseen",
)  # fmt: skip


def _syntax_verdict(exc: SyntaxError) -> Verdict:
    return decide(
        Finding.SYNTAX_ERROR,
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
    if calls := list(dict.fromkeys(c for b in verdict.details.get("builds", []) for c in b.get("torch_calls", []))):
        found.append(Warning_("torch_compute_in_extension", f"the extension the host built calls PyTorch from C++: "
                              f"{', '.join(calls[:6])}"))  # fmt: skip
    if ops := verdict.details.get("op_counts"):
        listed = ", ".join(f"{n} {name}" for name, n in sorted(ops.items(), key=lambda item: -item[1])[:5])
        found.append(Warning_("torch_compute_at_runtime", f"forward dispatched PyTorch compute ops: {listed}"))
    if unseen := verdict.details.get("ops_unseen"):
        found.append(Warning_("ops_unseen", f"the op count could not see all of forward: {'; '.join(unseen)[:400]} "
                              "(a dispatch mode sees only the thread it is entered on)"))  # fmt: skip
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
        """`prespawn` keeps spare candidate workers with torch imported (`options.spare_workers` of them), for
        callers that judge many."""
        self.problem = problem
        self.prespawn = prespawn
        self.options = options or EvalOptions()
        self.on_progress = on_progress or (lambda phase, detail: None)
        try:
            self.sandbox = choose(self.options.sandbox)
        except SandboxUnavailable as exc:
            raise EnvironmentProblem(str(exc)) from None
        self.scratch = make_scratch()
        inbox = self.scratch / "inbox"
        inbox.mkdir()
        self.env = worker_env()
        self.limits = Limits(memory=self.options.memory_limit) if self.options.memory_limit else Limits()
        init_seed = self.options.seed if self.options.seed is not None else secrets.randbits(31)
        self.broker = BuildBroker(self.options.cache_dir / "builds", self.sandbox, self.env, self.limits, self.scratch)
        self.reference = ReferenceWorker(problem, self.options, self.sandbox, self.env, self.limits,
                                         self.scratch / "reference", inbox, init_seed, self.on_progress)  # fmt: skip
        self.run_context = RunContext(self.options, self.reference, self.broker, WorkerFiles(inbox),
                                      problem.path.name, self.on_progress)  # fmt: skip
        self.closed = False
        self._spares: list[tuple[WorkerProcess, Path]] = []
        self.counter = itertools.count(1)
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
        self._spares = []
        self.reference.process = None
        kill_workers_under(self.scratch)
        remove_tree(self.scratch)

    @property
    def device(self) -> str:
        return self.reference.device

    @property
    def environment(self) -> dict[str, Any]:
        return {**self.reference_ready()["environment"], "sandbox": self.sandbox.describe()}

    def speed_of_light_line(self) -> str | None:
        """The bound as one line for the model's first prompt."""
        bound = self.reference.bound()
        return bound.line() if bound else None

    def reference_ready(self) -> dict[str, Any]:
        """Start the reference worker once (host/reference.py); raise ProblemError if the problem cannot run."""
        return self.reference.ready()

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
        except PARSE_ERRORS as exc:  # nested deeper than Python reads: the candidate's, never the host's failure
            verdict = decide(Finding.SYNTAX_ERROR, f"Python cannot read the candidate ({type(exc).__name__}: nested "
                             "too deeply?)")  # fmt: skip
            return self._stamp(verdict, started), None
        if "ModelNew" not in top_level_names(tree):
            verdict = decide(Finding.NO_MODEL_NEW, "the candidate defines no ModelNew class")
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
            message = f"rejected under --strict: {codes} ({found[0].message})"
            overrule(verdict, Finding.STRICT, message, "unstrict_status")
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
        builds_only: bool = False,
    ) -> tuple[WorkerProcess, Path]:
        """A candidate worker that sees its scratch, and read-only a private copy of the problem file and the
        libraries built for it (see given_dir); `prefix`, `extra_binds` and `extra_env`: a tool it runs under
        (Nsight Compute, compute-sanitizer), that tool's files and what the tool needs set; `builds_only`: it
        only loads the candidate and is killed."""
        scratch = scratch or self.fresh_scratch("candidate")
        given = given_dir(scratch)
        given.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.problem.path, given / self.problem.path.name)
        binds = [Bind(str(given)), *extra_binds]
        env = {**self.env, **(extra_env or {})}
        if not builds_only and self._compiles():
            env[WITH_DYNAMO] = "1"
        if self.options.compiled:  # read-only: the worker starts its own cache, in its private /tmp, from a copy
            binds.append(Bind(str(self.reference.compile_cache())))
            env[COMPILE_SEED] = str(self.reference.compile_cache())
        return WorkerProcess("candidate", scratch, env, self.sandbox, binds, self.limits, prefix), scratch

    def _compiles(self) -> bool:
        """Whether candidates here run torch.compile before they are timed (--compiled) or are timed beside a
        compiled baseline, whose device is known once the reference is ready (before any candidate is taken)."""
        if self.options.compiled:
            return True
        device = self.reference.known_device
        return device is not None and compile_baseline_on(self.options.compile_baseline, device)

    def fresh_scratch(self, label: str) -> Path:
        """A directory name no run of this evaluator has had (the caller's to create and to kill under)."""
        return self.scratch / f"{label}-{next(self.counter)}"

    def tool_run(
        self,
        label: str,
        source: str,
        prefix: Callable[[Path], Sequence[str]],
        binds: Sequence[Bind],
        env: Mapping[str, str] | None = None,
        scratch: Path | None = None,
    ) -> HostRun:
        """A run of `source` in a fresh candidate worker under a tool (Nsight Compute, compute-sanitizer):
        `prefix` is the tool's command line for the run's scratch (where the tool writes its log); `scratch`
        is the caller's when it may cancel the run (it kills what runs there), else a fresh one."""
        scratch = scratch or self.fresh_scratch(label)
        worker, _ = self.spawn_candidate_worker(scratch, prefix(scratch), binds, env)
        return HostRun(self.run_context, worker, scratch, source, evaluation=next(self.counter))

    def _take_candidate_worker(self) -> tuple[WorkerProcess, Path]:
        """The oldest live spare worker (torch already imported), else a new one; and the spares are topped up
        now, so that their start overlaps this one's (when this one is not ready yet: the other core), its
        build and its checks (timings pause them). A worker serves one candidate: a spare never ran a command
        before. With two spares, the second evaluation of a burst finds one ready too."""
        taken: tuple[WorkerProcess, Path] | None = None
        while self._spares and taken is None:
            spare = self._spares.pop(0)
            if spare[0].alive():
                spare[0].claim()
                taken = spare
            else:
                spare[0].kill()
        taken = taken or self.spawn_candidate_worker()
        self._start_spares()
        return taken

    def _start_spares(self) -> None:
        wanted = spare_count(self.options.spare_workers) if self.prespawn else 0
        while not self.closed and len(self._spares) < wanted:
            self._spares.append(self.spawn_candidate_worker())
            self._spares[-1][0].hold_as_spare()

    def _run_candidate(self, source: str) -> tuple[Verdict, CandidateEvidence | None]:
        worker, scratch = self._take_candidate_worker()
        self._candidate_log = worker.log_path
        self.broker.last_log = None
        run = HostRun(self.run_context, worker, scratch, source, evaluation=next(self.counter))
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

    def _candidate_done(self, run: HostRun, once: threading.Event, spare: bool = True) -> None:
        """The candidate's worker is finished with (after its verdict, or its evidence): killed, and the spares
        topped up (one started at the take died, or none was started)."""
        run.worker.kill()
        if once.is_set():
            return
        once.set()
        run.worker.empty_scratch()
        if spare:
            self._start_spares()

    def _nsight_wanted(self) -> bool:
        return self.options.profile and self.options.ncu != "off" and self.device.startswith("cuda")

    def nsight(self, found: Verdict, source: str, scratch: Path, progress: bool = True) -> None:
        """Nsight Compute's digest of the kernels of one call of a correct CUDA kernel, as evidence, with the
        profile (see host/ncu.py), in `scratch`."""
        if (tool := find_ncu(self.options.ncu)) is None:
            found.evidence["ncu"] = {"skipped": "ncu not found (install Nsight Compute, or pass --ncu PATH)"}
            return
        if progress:
            self.on_progress("ncu", "profiling the kernels with Nsight Compute")
        started = time.perf_counter()
        found.evidence["ncu"] = ncu_pass(self.tool_run, tool, self.reference_sample(), source, scratch)
        found.phases_s["ncu"] = round(time.perf_counter() - started, 3)

    def reference_sample(self) -> bytes:
        """One call's inputs, drawn by the reference worker from a fresh secret seed, as the host read them from its
        outbox: what the tools' passes run on. Never a file from the candidate's scratch, which its process could
        have rewritten after its trials."""
        paths = self.reference.ask(
            {"cmd": "trials", "eval": next(self.counter), "seed": secrets.randbits(62), "fresh": 1, "duplicates": 0},
            "trials_ready",
        )["paths"]
        return self.reference.outbox().read(paths[0])

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
        result = sanitize_pass(self.tool_run, tool, tuple(tools), self.reference_sample(), source)
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
        worker, scratch = self.spawn_candidate_worker(builds_only=True)
        run = HostRun(self.run_context, worker, scratch, source)
        run.files.write("candidate.py", source.encode())
        try:
            run.load()
        except (Decided, WorkerGone, WorkerTimeout, ProtocolViolation, ReferenceLost):
            pass
        finally:
            worker.kill()
