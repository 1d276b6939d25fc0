"""The reference worker: inputs, reference outputs and timings, and the judge.

It stays alive for the evaluator's lifetime, so the reference is run and
timed once per problem, however many candidates follow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kevin_tui.evaluator import worker as w
from kevin_tui.evaluator.judge import Leaf, judge
from kevin_tui.evaluator.timing import TimingPlan, time_call


class ProblemBroken(Exception):
    pass


def prepare(request: dict[str, Any], device: str) -> tuple[Any, Any, list, list, bool]:
    path = request["problem_path"]
    try:
        module = w.import_file(path, "kevin_reference")
    except BaseException as exc:
        raise ProblemBroken(f"{path}: importing it raised {type(exc).__name__}: {exc}") from exc
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not callable(getattr(module, name, None)):
            raise ProblemBroken(f"{path}: {name} is missing or not callable")
    seed = request["seed"]
    try:
        init_inputs = w.seeded(seed, module.get_init_inputs)
        model = w.seeded(seed, lambda: module.Model(*init_inputs)).to(device)
    except Exception as exc:
        raise ProblemBroken(f"{path}: building Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}") from exc
    trials, outputs, mutates = [], [], False
    for trial in range(request["trials"]):
        try:
            inputs = w.seeded(seed + 1 + trial, module.get_inputs)
            if not isinstance(inputs, list | tuple):
                raise TypeError(f"get_inputs() returned a {type(inputs).__name__}, not a list")
            args = w.to_device(list(inputs), device)
            original = w.clone(args)
            with torch.no_grad():
                out = model(*args)
            w.synchronize(device)
        except Exception as exc:
            raise ProblemBroken(f"{path}: the reference forward raised {type(exc).__name__}: {exc}") from exc
        mutates = mutates or not w.same(args, original)
        trials.append(list(inputs))
        outputs.append(w.to_device(out, "cpu"))
    return model, init_inputs, trials, outputs, mutates


def load_leaves(path: str) -> list[dict[str, list[Leaf]]]:
    payload = torch.load(path, weights_only=True)
    return [{order: [Leaf(**leaf) for leaf in run[order]] for order in ("before", "after")} for run in payload]


def reference_timings(model: Any, args: list, device: str, plan: TimingPlan, with_compile: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    with torch.no_grad():
        result["eager"] = {k: v.__dict__ for k, v in time_call(lambda: model(*args), plan, device).items()}
        if with_compile:
            try:
                compiled = torch.compile(model)
                result["compile"] = {k: v.__dict__ for k, v in time_call(lambda: compiled(*args), plan, device).items()}
            except Exception as exc:
                result["compile_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return result


def run_reference(request: dict[str, Any], channel: w.Channel) -> None:
    device = w.resolve_device(request["device"])
    try:
        model, init_inputs, trials, outputs, mutates = prepare(request, device)
    except ProblemBroken as exc:
        channel.emit("problem_error", message=str(exc), traceback=w.short_traceback(exc.__cause__ or exc))
        return
    scratch = Path(request["scratch"])
    inputs_path = scratch / "inputs.pt"
    torch.save({"init_inputs": init_inputs, "trials": trials}, inputs_path)
    channel.emit(
        "ready",
        device=device,
        inputs_path=str(inputs_path),
        reference_mutates_inputs=mutates,
        environment=w.environment(device),
    )
    timings: dict[str, Any] | None = None
    while (command := channel.next_command())["cmd"] != "exit":
        if command["cmd"] == "judge":
            verdict = judge(
                outputs,
                load_leaves(command["outputs_path"]),
                device,
                command.get("atol"),
                command.get("rtol"),
            )
            channel.emit(
                "judged",
                passed=verdict.passed,
                checks=[c.__dict__ for c in verdict.checks],
                mismatch=verdict.mismatch,
                message=verdict.message,
            )
        elif command["cmd"] == "time":
            if timings is None:
                args = w.to_device(trials[0], device)
                plan = TimingPlan(**command["plan"])
                timings = reference_timings(model, args, device, plan, command.get("compile", False))
            channel.emit("timed", timings=timings)
