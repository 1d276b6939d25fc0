"""The proof that a kernel belongs in your model (runs in the worker): the whole model before and after
`install`, on the same inputs, compared and timed, for inference and for training.

The model is built once; a deep copy gets the kernel through the generated helper itself (the file
that will be committed), so what is checked is what you will run. Outputs must match within the
evaluator's tolerance for their dtype (the absolute tolerance bounded by rtol times the largest
reference value), on the check's inputs, on fresh ones, and on the check's own tensors with a few values
changed in place. Then both are timed in interleaved rounds, in a random order each round, each call
on a new sample of the inputs drawn before its clock starts (so no remembered answer helps), and the
end-to-end speedup is the ratio of the median per-call times: a kernel can win alone and lose in
the model (extra copies, layouts, launches), and this is the figure that says so.

Where gradients can flow, the training proof follows (kevin_tui.usermodel.training_check): the
kernel's own autograd is tried first and kept only if every gradient matches the model's; otherwise
the helper's recompute backward is used, and must match. Then optimizer steps, torch.compile, and
the time of a training step (forward and backward) before and after.
"""

from __future__ import annotations

import copy
import math
import random
import secrets
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kevin_tui.evaluator.worker.common import import_file
from kevin_tui.evaluator.worker.inputs import near_duplicate
from kevin_tui.evaluator.worker.judge import compare_number, tolerance_for, typed_numbers, widest_float
from kevin_tui.usermodel.loader import UserModelError, run_forward, where
from kevin_tui.usermodel.profiling import synchronize
from kevin_tui.usermodel.training_check import (
    UNCOMPARABLE,
    backward,
    compare_gradients,
    compiled,
    graded,
    gradients,
    loss_weights,
    optimizer_steps,
    saved_bytes,
    trainable,
)

ROUND_S = 0.05


def import_helper(path: Path) -> Any:
    return import_file(path, f"kevin_apply_{path.stem}")


MODES = ("train", "eval")
# A gradient or parameter close in relative L2 error may still have no value further off than this many times rtol
# times its largest value: the norm of a large tensor hides a few values that are simply wrong (a bf16 weight
# gradient of 1M values with an 8x8 tail tile left at zero, values up to 2.25 off, had an L2 error of 0.8%: passed).
FAR_SHARE = 10.0
OTHER_MODE_SEED = 20250601


def install(helper: Any, model: nn.Module, backward: str = "recompute") -> tuple[nn.Module, list[str], list[str]]:
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
            after = helper.install(after, enabled=True, backward=backward)
    except Exception as exc:
        raise UserModelError(f"installing the kernel raised {where(exc)}") from None
    return after, swapped, left


def compare(
    expected: Any, got: Any, rtol: float | None, atol: float | None, at: str = "output"
) -> tuple[str | None, float]:
    """Why the outputs differ (None when they match within tolerance), and the largest absolute difference:
    `UNCOMPARABLE` (infinite) where no distance says how far apart they are (another structure, dtype or shape,
    other integers, NaN where the other is a number), so no bar on the difference can pass them."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.dtype != expected.dtype:
            return f"{at} is {_kind(got)} where the model gave {_kind(expected)}", UNCOMPARABLE
        if not expected.is_floating_point():
            return (None, 0.0) if torch.equal(expected, got) else (f"{at}: integer values differ", UNCOMPARABLE)
        default_atol, used_rtol = tolerance_for(expected.dtype, atol, rtol)
        reference, value = expected.double(), got.double()
        largest = reference.nan_to_num(0, 0, 0).abs().max().item() if expected.numel() else 0.0
        used_atol = default_atol if atol is not None else min(default_atol, used_rtol * largest)
        diff = (value - reference).abs()
        # NaN or an infinity on either side matches only the same there (an infinite reference made its own bound
        # infinite: -inf where the model gave +inf, or 0 where it gave -inf, passed)
        finite = value.isfinite() & reference.isfinite()
        apart = ~finite & ~((value == reference) | (value.isnan() & reference.isnan()))
        worst = diff[finite].max().item() if bool(finite.any()) else 0.0
        if bool(apart.any()):
            worst = UNCOMPARABLE
        bad = (diff > used_atol + used_rtol * reference.abs()) | apart
        if bad.any():
            return (f"{at}: {int(bad.sum())} of {bad.numel()} values outside tolerance (largest difference "
                    f"{worst:.3g}, atol {used_atol:.3g}, rtol {used_rtol:g})"), worst  # fmt: skip
        return None, worst
    if isinstance(expected, list | tuple | dict):
        if (
            type(got) is not type(expected)
            or len(got) != len(expected)
            or (isinstance(expected, dict) and isinstance(got, dict) and got.keys() != expected.keys())
        ):
            return f"{at} is {_kind(got)} where the model gave {_kind(expected)}", UNCOMPARABLE
        keys = list(expected) if isinstance(expected, dict) else range(len(expected))
        worst = 0.0
        for key in keys:
            why, difference = compare(expected[key], got[key], rtol, atol, f"{at}[{key!r}]")
            if why:
                return why, difference
            worst = max(worst, difference)
        return None, worst
    if isinstance(expected, float) and isinstance(got, float):  # as eval judges one: its dtype's tolerance
        problem, gap = compare_number(expected, got, atol, rtol, f"{at} is "), abs(got - expected)
        if not math.isfinite(gap):  # NaN or an infinity: matched only by the same, else no distance says how far
            gap = UNCOMPARABLE if problem else 0.0
        return (problem["reason"] if problem else None), gap
    return (None, 0.0) if expected == got else (f"{at} is {got!r} where the model gave {expected!r}", UNCOMPARABLE)


def model_output(model: nn.Module, args: list[Any]) -> Any:
    """The model's output, each Python float in it known as the dtype the model computed it in (the widest float
    dtype of its inputs, parameters and buffers, as eval's judge takes it): compared in that dtype's tolerance, as
    an honest kernel's `.item()` summed in another order is a few units in the last place off."""
    dtype = widest_float([*args, *model.parameters(), *model.buffers()])
    return typed_numbers(run_forward(model, args), dtype)


def compare_norm(expected: Any, got: Any, rtol: float | None, atol: float | None, at: str) -> tuple[str | None, float]:
    """As `compare`, but a tensor whose relative L2 error is within rtol matches too: a gradient or a
    parameter after training carries the forward's rounding differences through the whole model, and
    in bf16 one of thousands of values can be a unit in the last place off."""
    why, difference = compare(expected, got, rtol, atol, at)
    if why is None or not isinstance(expected, torch.Tensor) or not isinstance(got, torch.Tensor):
        return why, difference
    if got.shape != expected.shape or got.dtype != expected.dtype or not expected.is_floating_point():
        return why, difference
    _, used_rtol = tolerance_for(expected.dtype, atol, rtol)
    reference, value = expected.double(), got.double()
    relative = ((value - reference).norm() / reference.norm().clamp_min(1e-30)).item()
    if relative > used_rtol:
        return f"{why}; relative L2 error {relative:.3g} > {used_rtol:g}", difference
    far = FAR_SHARE * used_rtol * reference.nan_to_num(0, 0, 0).abs().max().item()
    if difference > far:  # `compare`'s largest difference: infinite where NaN stands against a number
        why = f"{why}; a value is {difference:.3g} off, more than {FAR_SHARE:g}x rtol of the largest ({far:.3g})"
        return why, difference
    return None, difference


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor {list(value.shape)}"
    return f"a {type(value).__name__}"


def timed_rounds(
    calls: dict[str, Callable[[list[Any]], Any]], device: str, rounds: int, inputs: Callable[[], list[Any]]
) -> dict[str, list[float]]:  # fmt: skip
    """Milliseconds per call of each, one figure per round; in each round every one runs the same
    number of calls, in a random order, each call on its own `inputs()` (made before its clock starts)."""
    for call in calls.values():
        call(inputs())  # warm (the kernel's first call may load or tune)
    drawn = time.perf_counter()
    given = inputs()
    synchronize(device)
    next(iter(calls.values()))(given)
    synchronize(device)
    # calls a round by a call's time with its draw: the draw is outside the clock, not outside the wait (a fast
    # kernel on large inputs made thousands of draws a round, minutes of drawing for a check)
    per_round = max(1, int(ROUND_S / max(time.perf_counter() - drawn, 1e-6)))
    times: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    for _ in range(rounds):
        random.shuffle(order)
        for name in order:
            spent = 0.0
            for _ in range(per_round):
                given = inputs()
                synchronize(device)  # the inputs' own work is done before the clock starts
                start = time.perf_counter()
                calls[name](given)
                synchronize(device)
                spent += time.perf_counter() - start
            times[name].append(spent * 1e3 / per_round)
    return times


def timed(
    before: Callable[[list[Any]], Any], after: Callable[[list[Any]], Any], device: str, rounds: int,
    inputs: Callable[[], list[Any]],
) -> dict[str, Any]:  # fmt: skip
    times = timed_rounds({"before": before, "after": after}, device, rounds, inputs)
    median_before, median_after = statistics.median(times["before"]), statistics.median(times["after"])
    return {"before_ms": median_before, "after_ms": median_after, "speedup": median_before / median_after,
            "interval": speedup_interval(times["before"], times["after"]), "rounds": len(times["before"])}  # fmt: skip


def inference(model: nn.Module) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> Any:
        with torch.no_grad():
            return model(*args)

    return call


def training_step(model: nn.Module, weights: list[torch.Tensor]) -> Callable[[list[Any]], Any]:
    return lambda args: gradients(model, args, weights)


def check(
    model: nn.Module, args: list[Any], helper_path: Path, device: str, options: dict[str, Any],
    fresh: Sequence[tuple[str, list[Any]]] = (), *, draw: Callable[[], list[Any]],
) -> dict:  # fmt: skip
    """`fresh`: other inputs (new values, another batch size) the outputs and gradients are compared on too. `draw`:
    a new sample of the check's inputs (from their specs: usermodel/worker.py `sampler`) for each timed call."""
    helper = import_helper(helper_path)
    helper.MODES = MODES  # the kernel in every mode while it is checked: what it is used in is decided here
    after, swapped, left = install(helper, model)
    expected = model_output(model, args)
    try:
        got = run_forward(after, args)
    except UserModelError as exc:
        return {"passed": False, "message": f"with the kernel, the model fails: {exc}", "swapped": swapped,
                "left": left}  # fmt: skip
    rtol, atol = options.get("rtol"), options.get("atol")
    why, difference = compare(expected, got, rtol, atol)
    result: dict[str, Any] = {"swapped": swapped, "left": left, "max_abs_diff": difference}
    if why:
        return {**result, "passed": False, "message": f"outputs differ: {why}"}
    other = same_shaped(args, fresh)
    why = changed_in_place_differs(model, after, args, other, rtol, atol)
    if not why:
        why, fresh = fresh_outputs(model, after, args, fresh, result, rtol, atol)
    if why:
        return {**result, "passed": False, "message": f"outputs differ: {why}"}
    result["modes"], other_mode = proven_modes(model, after, args, rtol, atol)
    if other_mode:
        result["other_mode"] = other_mode
    rounds = int(options.get("rounds", 20))
    if trainable(model, args):
        after, training, why = check_training(helper, model, after, args, expected, options, fresh)
        result["training"] = training
        if why:
            return {**result, "passed": False, "message": why}
    result.update(timed(inference(model), inference(after), device, rounds, draw))
    if "training" in result:
        weights = loss_weights(expected)
        step = timed(training_step(copy.deepcopy(model), weights), training_step(copy.deepcopy(after), weights),
                     device, rounds, draw)  # fmt: skip
        result["training"]["step"] = step
    return {**result, "passed": True, "message": "outputs match"}


CHANGED_IN_PLACE = "the check's inputs with a few values changed in place"


class KernelFailed(Exception):
    """The model with the kernel raised where the model itself did not (`error` says how)."""

    def __init__(self, error: UserModelError) -> None:
        super().__init__(str(error))
        self.error = error


def seeded_outputs(model: nn.Module, after: nn.Module, args: list[Any]) -> tuple[Any, Any]:
    """The model's output on `args` and the model's with the kernel, each drawn from the same seed (so dropout
    draws alike), outside the caller's random state. The model's own UserModelError propagates; the kernel's
    is a KernelFailed."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(OTHER_MODE_SEED)
        expected = model_output(model, args)
        torch.manual_seed(OTHER_MODE_SEED)
        try:
            return expected, run_forward(after, args)
        except UserModelError as exc:
            raise KernelFailed(exc) from exc


def same_shaped(args: list[Any], fresh: Sequence[tuple[str, list[Any]]]) -> list[Any] | None:
    """The first fresh inputs whose tensors have the check's shapes and dtypes (new values), or None."""

    def kinds(values: list[Any]) -> list[Any]:
        return [(tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else None for v in values]

    return next((inputs for _, inputs in fresh if kinds(inputs) == kinds(args)), None)


def changed_in_place_differs(
    model: nn.Module, after: nn.Module, args: list[Any], other: list[Any] | None, rtol: float | None,
    atol: float | None,
) -> str | None:  # fmt: skip
    """Why the model with the kernel differs from the model on the check's own tensors (the objects the kernel was
    just called on, at the same addresses) after a few of their values were taken from `other` in place, as eval's
    near-duplicate trials take them; None when it does not, or nothing varies. Compared only on inputs that differed
    everywhere, a kernel remembering its answer by the address and a few values passed (and every timed call was a
    hit): tests/candidates/redteam20/sampled_memo_apply.py. The values are put back after."""
    with torch.no_grad():
        changed = near_duplicate(args, other, secrets.randbits(62)) if other is not None else None
    if changed is None:
        return None
    kept = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]

    def put(values: list[Any]) -> None:
        with torch.no_grad():
            for arg, value in zip(args, values, strict=True):
                if isinstance(arg, torch.Tensor):
                    arg.copy_(value)

    put(changed)
    try:
        expected, got = seeded_outputs(model, after, args)
    except KernelFailed as exc:
        return f"on {CHANGED_IN_PLACE} the model with it fails: {exc}"
    except UserModelError:
        return None  # the model itself does not take it (a structure the few values broke)
    finally:
        put(kept)
    why = compare(expected, got, rtol, atol)[0]
    return f"{why} (on {CHANGED_IN_PLACE})" if why else None


def fresh_outputs(
    model: nn.Module, after: nn.Module, args: list[Any], fresh: Sequence[tuple[str, list[Any]]],
    result: dict[str, Any], rtol: float | None, atol: float | None,
) -> tuple[str | None, list[tuple[str, list[Any]]]]:  # fmt: skip
    """Why the model's output with the kernel differs from the model's on a fresh input (its label after; None when
    they match), and the fresh inputs compared, which the gradients are compared on too. Compared on the check's
    inputs alone, a kernel right only at the check's batch size (or on values it was fitted to) passed and then gave
    wrong outputs in the model; the recompute backward's gradients are right whatever the forward gives, so comparing
    them elsewhere did not see it. A kernel refusing other shapes (it fails loudly there, never silently) and an
    input the model itself does not take are listed in `result["fresh_skipped"]`, once for both checks."""
    compared: list[tuple[str, list[Any]]] = []
    for label, inputs in fresh:
        try:
            expected, got = seeded_outputs(model, after, inputs)
        except KernelFailed as exc:
            if _shapes(inputs) == _shapes(args):
                return f"on {label} the model with it fails: {exc}", compared
            result.setdefault("fresh_skipped", []).append(f"{label}: the kernel does not take it: {exc}")
            continue
        except UserModelError as exc:
            result.setdefault("fresh_skipped", []).append(f"{label}: the model does not take it: {exc}")
            continue
        if why := compare(expected, got, rtol, atol)[0]:
            return f"{why} (on {label})", compared
        compared.append((label, inputs))
    return None, compared


def proven_modes(
    model: nn.Module, after: nn.Module, args: list[Any], rtol: float | None, atol: float | None
) -> tuple[list[str], str | None]:  # fmt: skip
    """The modes the kernel may run in: the one checked, and the other (train or eval) where the model with the kernel
    gives the model's output there too, each drawing from the same seed (so dropout draws alike); else why not. A
    kernel judged in eval mode that leaves out its block's dropout passed and was then used in training."""
    checked = "train" if model.training else "eval"
    other = "eval" if model.training else "train"
    before, with_kernel = copy.deepcopy(model).train(not model.training), copy.deepcopy(after).train(not model.training)
    try:
        expected, got = seeded_outputs(before, with_kernel, args)
    except KernelFailed as exc:
        return [checked], f"in {other} mode the model with it fails: {exc}"
    why, _ = compare(expected, got, rtol, atol)
    if why:
        return [checked], f"in {other} mode its outputs differ from your model's: {why}"
    return [checked, other], None


def check_training(
    helper: Any, model: nn.Module, after: nn.Module, args: list[Any], expected: Any, options: dict[str, Any],
    fresh: Sequence[tuple[str, list[Any]]] = (),
) -> tuple[nn.Module, dict[str, Any], str | None]:  # fmt: skip
    """The model to install (with the kernel's own backward when its gradients match, else the
    recompute one), the training figures, and why it fails (None: it passes). The gradients are compared
    on the check's inputs, drawn at a seed the kernel's author can know, and on the `fresh` ones its forward
    was compared on (`fresh_outputs`) with a loss of fresh weights: a backward right only on the check's
    inputs is not right."""

    def within(reference: Any, value: Any, at: str) -> tuple[str | None, float]:
        return compare_norm(reference, value, options.get("rtol"), options.get("atol"), at)

    weights = loss_weights(expected)
    _, expected_grads = gradients(model, args, weights)
    figures: dict[str, Any] = {"backward": "recompute", "compared": len(expected_grads)}
    cases = [("", args, weights, expected_grads), *gradient_cases(model, fresh, figures)]

    def differ(candidate: nn.Module) -> tuple[str | None, float]:
        """Why `candidate`'s gradients are not the model's on some case (its label after the first's), and the
        largest difference; raises what its backward raises."""
        worst = 0.0
        for label, inputs, loss, grads in cases:
            _, got = gradients(candidate, inputs, loss)
            why, difference = compare_gradients(grads, got, within)
            if why:
                return f"{why} (on {label})" if label else why, difference
            worst = max(worst, difference)
        return None, worst

    if options.get("backward_kernel"):
        figures["backward"] = "backward_kernel"
        after, _, _ = install(helper, model, backward="backward_kernel")
    else:
        own, _, _ = install(helper, model, backward="kernel")
        try:
            why_not, _ = differ(own)
        except Exception as exc:
            why_not = f"its backward raises {where(exc)}"
        if why_not is None:
            figures["backward"], after = "kernel", own
        else:
            figures["own_backward"] = f"not used: {why_not}"
    try:
        why, figures["max_grad_diff"] = differ(after)
    except Exception as exc:
        return after, figures, f"the backward with the kernel raises {where(exc)}"
    if why:
        return after, figures, f"gradients differ: {why}"
    figures["saved_before_bytes"], figures["saved_after_bytes"] = saved_bytes(model, args), saved_bytes(after, args)
    steps = int(options.get("steps", 3))
    if steps:
        figures["steps"], why = optimizer_steps(model, after, args, weights, steps, within)
        figures["step_count"] = steps
        if why:
            return after, figures, f"training differs: {why}"
    if options.get("compile", True):
        figures["compiled"], why = compiled(model, after, args, expected, expected_grads, weights, within)
        if why:
            return after, figures, why
    return after, figures, None


def gradient_cases(
    model: nn.Module, fresh: Sequence[tuple[str, list[Any]]], figures: dict[str, Any]
) -> list[tuple[str, list[Any], list[torch.Tensor], dict[str, Any]]]:
    """Each fresh input's label, inputs, loss weights (from a secret seed) and the model's own gradients, for the
    fresh inputs both the model and the kernel took forward (`fresh_outputs`); one whose backward the model
    itself cannot run is listed in `figures["fresh_skipped"]`."""
    cases = []
    for label, inputs in fresh:
        try:
            copies, output = graded(model, inputs)  # one forward: its output says the weights' shapes
            weights = loss_weights(output, seed=secrets.randbits(63))
            expected_grads = backward(model, copies, output, weights)[1]
        except Exception as exc:  # the model's own failure: that input is not one it takes
            figures.setdefault("fresh_skipped", []).append(f"{label}: the model does not take it: {where(exc)}")
            continue
        cases.append((label, inputs, weights, expected_grads))
    figures["fresh"] = [label for label, *_ in cases]
    return cases


def _shapes(args: list[Any]) -> list[Any]:
    return [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args]


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
