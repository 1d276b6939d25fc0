"""The proof that a kernel belongs in your model (runs in the worker): the whole model before and after
`install`, on the same inputs, compared and timed.

The model is built once; a deep copy gets the kernel through the generated helper itself (the file
that will be committed), so what is checked is what you will run. Outputs must match within the
evaluator's tolerance for their dtype (the absolute tolerance bounded by rtol times the largest
reference value). Then both are timed in interleaved rounds, in a random order each round, and the
end-to-end speedup is the ratio of the median per-call times: a kernel can win alone and lose in
the model (extra copies, layouts, launches), and this is the figure that says so.
"""

from __future__ import annotations

import copy
import random
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kevin_tui.evaluator.worker.common import import_file
from kevin_tui.evaluator.worker.judge import tolerance_for
from kevin_tui.usermodel.loader import UserModelError, run_forward, where
from kevin_tui.usermodel.profiling import synchronize

ROUND_S = 0.05


def import_helper(path: Path) -> Any:
    return import_file(path, f"kevin_apply_{path.stem}")


def install(helper: Any, model: nn.Module) -> tuple[nn.Module, list[str], list[str]]:
    """A copy of the model with the kernel installed, the swapped paths and the ones left alone."""
    found = helper.matches(model)
    if not found:
        raise UserModelError(f"the model has no {helper.CLASS} (from {helper.SOURCE}): nothing to install")
    swapped = [path or "(the model)" for path, _, why in found if why is None]
    left = [f"{path or '(the model)'}: {why}" for path, _, why in found if why is not None]
    if not swapped:
        raise UserModelError(f"no {helper.CLASS} in the model is built like the kernel's problem: {left[0]}")
    after = copy.deepcopy(model)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the ones left alone are reported above
            after = helper.install(after, enabled=True)
    except Exception as exc:
        raise UserModelError(f"installing the kernel raised {where(exc)}") from None
    return after, swapped, left


def compare(
    expected: Any, got: Any, rtol: float | None, atol: float | None, at: str = "output"
) -> tuple[str | None, float]:
    """Why the outputs differ (None when they match within tolerance), and the largest absolute difference."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.dtype != expected.dtype:
            return f"{at} is {_kind(got)} where the model gave {_kind(expected)}", 0.0
        if not expected.is_floating_point():
            return (None if torch.equal(expected, got) else f"{at}: integer values differ"), 0.0
        default_atol, used_rtol = tolerance_for(expected.dtype, atol, rtol)
        reference, value = expected.double(), got.double()
        largest = reference.nan_to_num(0, 0, 0).abs().max().item() if expected.numel() else 0.0
        used_atol = default_atol if atol is not None else min(default_atol, used_rtol * largest)
        diff = (value - reference).abs()
        worst = diff.nan_to_num(0).max().item() if diff.numel() else 0.0
        bad = (diff > used_atol + used_rtol * reference.abs()) | (value.isnan() != reference.isnan())
        if bad.any():
            return (f"{at}: {int(bad.sum())} of {bad.numel()} values outside tolerance (largest difference "
                    f"{worst:.3g}, atol {used_atol:.3g}, rtol {used_rtol:g})"), worst  # fmt: skip
        return None, worst
    if isinstance(expected, list | tuple | dict):
        if type(got) is not type(expected) or len(got) != len(expected):
            return f"{at} is {_kind(got)} where the model gave {_kind(expected)}", 0.0
        keys = list(expected) if isinstance(expected, dict) else range(len(expected))
        worst = 0.0
        for key in keys:
            why, difference = compare(expected[key], got[key], rtol, atol, f"{at}[{key!r}]")
            if why:
                return why, difference
            worst = max(worst, difference)
        return None, worst
    return (None if expected == got else f"{at} is {got!r} where the model gave {expected!r}"), 0.0


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor {list(value.shape)}"
    return f"a {type(value).__name__}"


def timed_rounds(models: dict[str, nn.Module], args: list[Any], device: str, rounds: int) -> dict[str, list[float]]:
    """Per-call milliseconds of each model, one figure per round; in each round every model runs the
    same number of calls, in a random order."""
    run_forward(models["after"], args)  # warm (the kernel's first call may load or tune)
    start = time.perf_counter()
    run_forward(models["before"], args)
    synchronize(device)
    per_round = max(1, int(ROUND_S / max(time.perf_counter() - start, 1e-6)))
    times: dict[str, list[float]] = {name: [] for name in models}
    order = list(models)
    with torch.no_grad():
        for _ in range(rounds):
            random.shuffle(order)
            for name in order:
                start = time.perf_counter()
                for _ in range(per_round):
                    models[name](*args)
                synchronize(device)
                times[name].append((time.perf_counter() - start) * 1e3 / per_round)
    return times


def check(model: nn.Module, args: list[Any], helper_path: Path, device: str, options: dict[str, Any]) -> dict:
    helper = import_helper(helper_path)
    after, swapped, left = install(helper, model)
    expected = run_forward(model, args)
    try:
        got = run_forward(after, args)
    except UserModelError as exc:
        return {"passed": False, "message": f"with the kernel, the model fails: {exc}", "swapped": swapped,
                "left": left}  # fmt: skip
    why, difference = compare(expected, got, options.get("rtol"), options.get("atol"))
    result: dict[str, Any] = {"swapped": swapped, "left": left, "max_abs_diff": difference}
    if why:
        return {**result, "passed": False, "message": f"outputs differ: {why}"}
    times = timed_rounds({"before": model, "after": after}, args, device, int(options.get("rounds", 20)))
    before, now = statistics.median(times["before"]), statistics.median(times["after"])
    return {**result, "passed": True, "before_ms": before, "after_ms": now, "speedup": before / now,
            "interval": speedup_interval(times["before"], times["after"]), "rounds": len(times["before"]),
            "message": "outputs match"}  # fmt: skip


def speedup_interval(before: list[float], after: list[float], draws: int = 2000) -> list[float]:
    """A 95% bootstrap interval of the speedup over the paired rounds (round-to-round noise, which on a
    busy machine is most of it)."""
    generator = random.Random(0)
    rounds = range(len(before))
    ratios = []
    for _ in range(draws):
        picked = [generator.choice(rounds) for _ in rounds]
        ratios.append(statistics.median(before[i] for i in picked) / statistics.median(after[i] for i in picked))
    ratios.sort()
    return [ratios[int(0.025 * draws)], ratios[int(0.975 * draws) - 1]]
