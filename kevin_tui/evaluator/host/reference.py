"""The reference worker, as the host talks to it: started once per evaluator, asked one command at a time.

It runs the problem's own Model (never a candidate): the inputs, the reference outputs, the judge,
the reference's timing rounds and the speed-of-light figures. A worker that dies, hangs or answers
out of turn is dropped and `ReferenceLost` says so; the next question starts a fresh one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.host.options import EvalOptions
from kevin_tui.evaluator.host.sandbox import Bind, Limits, Sandbox
from kevin_tui.evaluator.host.scratch import WorkerFiles
from kevin_tui.evaluator.host.speed_of_light import Bound, Peaks, cached_cpu_peaks, cpu_key, gpu_peaks, store_cpu_peaks
from kevin_tui.evaluator.host.workers import Arrived, WorkerGone, WorkerProcess, WorkerTimeout
from kevin_tui.evaluator.protocol import ProtocolViolation, compile_baseline_on
from kevin_tui.evaluator.verdict import EnvironmentProblem
from kevin_tui.problem import Problem, ProblemError


class ReferenceLost(Exception):
    """The reference worker died or hung: not the candidate's verdict, and the next one restarts it."""


def worker_threads() -> int:
    """CPU threads per worker: half the cores, since the reference and a candidate are alive at once."""
    return max(1, (os.cpu_count() or 2) // 2)


class ReferenceWorker:
    """The one reference worker of an evaluator; `process` is None until it runs (and after it is dropped)."""

    def __init__(
        self,
        problem: Problem,
        options: EvalOptions,
        sandbox: Sandbox,
        env: dict[str, str],
        limits: Limits,
        scratch: Path,
        inbox: Path,
        init_seed: int,
        on_progress: Callable[[str, str], None],
    ) -> None:
        self.problem, self.options, self.sandbox, self.env, self.limits = problem, options, sandbox, env, limits
        self.scratch, self.inbox, self.init_seed, self.on_progress = scratch, inbox, init_seed, on_progress
        self.process: WorkerProcess | None = None
        self.outbox_files: WorkerFiles | None = None  # its outbox, once it runs
        self._ready: dict[str, Any] | None = None
        self._bound: Bound | None = None

    def ready(self) -> dict[str, Any]:
        """Start the reference worker once; raise ProblemError if the problem cannot run."""
        if self._ready is not None:
            return self._ready
        self.on_progress("reference", "running the reference")
        outbox = self.scratch / "outbox"
        outbox.mkdir(parents=True, exist_ok=True)
        compiled = self.compile_cache()
        binds = [Bind(str(self.problem.path.resolve().parent)), Bind(str(self.inbox)), Bind(str(compiled), True)]
        env = {**self.env, "TORCHINDUCTOR_CACHE_DIR": str(compiled), "TRITON_CACHE_DIR": str(compiled / "triton")}
        worker = WorkerProcess("reference", self.scratch, env, self.sandbox, binds, self.limits)
        self.outbox_files = WorkerFiles(outbox)
        worker.send({
            "problem_path": str(self.problem.path.resolve()), "device": self.options.device, "cmd": "init",
            "init_seed": self.init_seed, "outbox": str(outbox), "threads": worker_threads(),
            "warm_compile": self.options.compiled, "compile_baseline": self.options.compile_baseline,
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
        self.process, self._ready = worker, event
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

    def outbox(self) -> WorkerFiles:
        """The running worker's outbox (the files it wrote for a candidate)."""
        if self.outbox_files is None:
            raise ReferenceLost("the reference worker is not running")
        return self.outbox_files

    def drop(self) -> None:
        if self.process is not None:
            self.process.kill()
        self.process, self._ready = None, None

    def await_event(self, expect: str) -> Arrived:
        """The reference's next event, which must be `expect`; if it died or hung it is dropped (the next
        candidate starts a fresh one) and ReferenceLost says what happened."""
        assert self.process is not None
        try:
            arrived = self.process.arrival(self.options.reference_timeout_s)
        except (WorkerGone, WorkerTimeout, ProtocolViolation) as exc:
            self.drop()
            raise ReferenceLost(f"the reference worker {exc} while asked for {expect}") from None
        if arrived.event["event"] != expect:
            message = arrived.event.get("message", "")
            self.drop()
            raise ReferenceLost(f"the reference worker answered {arrived.event['event']} {message}".rstrip())
        return arrived

    def ask(self, command: dict[str, Any], expect: str) -> dict[str, Any]:
        self.ready()
        self.tell(command)
        return self.await_event(expect).event

    def tell(self, command: dict[str, Any]) -> float:
        """Send the running reference a command; when it was sent (perf_counter)."""
        assert self.process is not None, "the reference is started before anything is asked of it"
        return self.process.send(command)

    # -- what its first answer says ----------------------------------------------------

    @property
    def device(self) -> str:
        return self.ready()["device"]

    def versions(self) -> dict[str, Any]:
        """What a build's cache key depends on."""
        environment = self.ready()["environment"]
        return {"torch": environment.get("torch"), "cuda": environment.get("cuda")}

    @property
    def known_device(self) -> str | None:
        """The device, if the worker is ready (never starts it)."""
        return None if self._ready is None else self._ready["device"]

    def compile_baseline(self) -> bool:
        return compile_baseline_on(self.options.compile_baseline, self.device)

    def bound(self) -> Bound | None:
        """The least time the problem can take here (None when the device's figures are unknown)."""
        ready = self.ready()
        if self._bound is not None:
            return self._bound
        if ready["device"].startswith("cuda"):
            peaks = gpu_peaks(ready["environment"].get("gpu", ""), self.options.peaks)
        else:
            cache, key = self.options.cache_dir / "machine.json", cpu_key(ready["threads"])
            peaks = cached_cpu_peaks(cache, key)
            if peaks is None:
                measured = self.ask({"cmd": "measure_peaks"}, "peaks")
                rate = measured["fp32_tflops"]
                peaks = Peaks(measured["bandwidth_gbs"], rate, rate, "measured on this CPU (copy and matmul)")
                store_cpu_peaks(cache, key, peaks)
        if peaks is not None:
            self._bound = Bound(ready["flops"], ready["work_bytes"], peaks)
        return self._bound
