"""Evaluation as Ray tasks: the optional extra `kevin-tui[ray]`, `kevin-tui batch --ray local|auto|ADDRESS`.

Each evaluation is a Ray task asking for one GPU (one CPU for `--device cpu`), so Ray places it on
a node with a free device, queues it while there is none, and runs one at a time per device. The
task builds, checks and times the kernel on that node, with the node's own build cache
(~/.cache/kevin-tui there, or its KEVIN_TUI_CACHE_DIR), and its verdict comes back here, where the
loop writes it into the run directory like any other. The reference check that opens a problem is
a task too: this process runs neither kernels nor references. A Ray worker process keeps the
evaluators of the last few problems it judged (their reference workers stay up between tasks).

kevin_tui itself travels with the job (runtime_env py_modules), so nodes need only its
dependencies (torch, ninja, and Ray).
"""

from __future__ import annotations

import hashlib
import shutil
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import kevin_tui
from kevin_tui.devices import resolve_device
from kevin_tui.errors import EXIT_USAGE, KevinError
from kevin_tui.evaluator import EnvironmentProblem, EvalOptions, Evaluator, Verdict
from kevin_tui.evaluator.host.options import default_cache_dir
from kevin_tui.evaluator.host.scratch import make_scratch
from kevin_tui.judge import JudgeFactory, ProgressFn
from kevin_tui.problem import Problem, ProblemError, parse_problem_source

KEPT_PER_WORKER = 4  # evaluators a Ray worker keeps (one reference worker each)


class RayUnavailable(KevinError):
    exit_code = EXIT_USAGE


# -- inside a Ray worker ------------------------------------------------------------------

_kept: OrderedDict[tuple[str, str, tuple], Evaluator] = OrderedDict()


def _evaluator(source: str, name: str, options: EvalOptions) -> Evaluator:
    """This worker's evaluator for the problem on the device Ray gave the task (made once)."""
    import ray

    key = (hashlib.sha256(source.encode()).hexdigest(), repr(options), tuple(ray.get_gpu_ids()))
    if key in _kept:
        _kept.move_to_end(key)
        return _kept[key]
    while len(_kept) >= KEPT_PER_WORKER:
        evicted = _kept.popitem(last=False)[1]
        evicted.close()
        shutil.rmtree(evicted.problem.path.parent, ignore_errors=True)
    path = make_scratch() / name  # swept by the next evaluator on the machine if Ray kills this worker
    path.write_text(source)
    evaluator = Evaluator(parse_problem_source(source, path), replace(options, cache_dir=default_cache_dir()))
    _kept[key] = evaluator
    return evaluator


def _reference_task(source: str, name: str, options: EvalOptions) -> dict[str, Any]:
    try:
        evaluator = _evaluator(source, name, options)
        return {"environment": evaluator.environment, "device": evaluator.device,
                "speed_of_light": evaluator.speed_of_light_line()}  # fmt: skip
    except ProblemError as exc:
        return {"problem_error": str(exc)}
    except EnvironmentProblem as exc:
        return {"environment_problem": str(exc)}


def _evaluate_task(source: str, name: str, options: EvalOptions, candidate: str) -> dict[str, Any]:
    try:
        return {"verdict": _evaluator(source, name, options).evaluate(candidate).to_dict()}
    except ProblemError as exc:
        return {"problem_error": str(exc)}
    except EnvironmentProblem as exc:
        return {"environment_problem": str(exc)}


def _answer(result: dict[str, Any]) -> dict[str, Any]:
    if "problem_error" in result:
        raise ProblemError(result["problem_error"])
    if "environment_problem" in result:
        raise EnvironmentProblem(result["environment_problem"])
    return result


# -- here ----------------------------------------------------------------------------------


class RayJudge:
    """A Judge (kevin_tui.judge) whose reference check and evaluations are Ray tasks."""

    def __init__(self, problem: Problem, options: EvalOptions, tasks: tuple[Any, Any]) -> None:
        self.problem = problem
        self.options = options
        self.reference_task, self.evaluate_task = tasks
        self.last_log: Path | None = None  # the build logs stay on the node that built
        self._ready: dict[str, Any] | None = None

    def _reference(self) -> dict[str, Any]:
        import ray

        if self._ready is None:
            ref = self.reference_task.remote(self.problem.source, self.problem.path.name, self.options)
            self._ready = _answer(ray.get(ref))
        return self._ready

    @property
    def environment(self) -> dict[str, Any]:
        return {**self._reference()["environment"], "evaluation": "ray"}

    @property
    def device(self) -> str:
        return self._reference()["device"]

    def speed_of_light_line(self) -> str | None:
        return self._reference()["speed_of_light"]

    def evaluate(self, source: str) -> Verdict:
        import ray

        ref = self.evaluate_task.remote(self.problem.source, self.problem.path.name, self.options, source)
        return Verdict.from_dict(_answer(ray.get(ref))["verdict"])

    def judge(self, source: str) -> tuple[Verdict, None]:
        """The remote task returns its verdict with the evidence in it: nothing follows."""
        return self.evaluate(source), None

    def prebuild(self, sources: list[str]) -> None:
        """Nothing: the task that evaluates a kernel builds it, on the node where it runs."""

    def close(self) -> None:
        """Nothing here: the Ray workers keep their evaluators until Ray shuts down."""


def ray_judge(address: str) -> tuple[JudgeFactory, Callable[[], None]]:
    """Connect to Ray ('local' starts a new local instance, shut down at the end; 'auto' or an
    address joins a running cluster); returns the judge factory and what to call at the end."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--ray needs Ray: pip install 'kevin-tui[ray]'") from None
    runtime_env = {"py_modules": [kevin_tui]}
    try:
        if address == "local":
            ray.init(address="local", runtime_env=runtime_env, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RayUnavailable(f"cannot connect to Ray at {address}: {exc}") from None
    gpus = ray.cluster_resources().get("GPU", 0)

    def factory(problem: Problem, options: EvalOptions, on_progress: ProgressFn | None) -> RayJudge:
        device = resolve_device(options.device, lambda: bool(gpus))  # the cluster's GPUs, not this machine's
        # max_calls=0: the worker lives on after a GPU task (Ray's default ends it), keeping its evaluators
        if device.startswith("cuda"):  # on the node, the one GPU Ray gave the task is cuda:0
            remote, device = ray.remote(max_calls=0, num_gpus=1), "cuda"
        else:
            remote = ray.remote(max_calls=0, num_cpus=1)
        tasks = (remote(_reference_task), remote(_evaluate_task))
        return RayJudge(problem, replace(options, device=device), tasks)

    return factory, ray.shutdown if address == "local" else (lambda: None)
