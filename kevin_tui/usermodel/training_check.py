"""The proof that an installed kernel trains and compiles like your model without it (runs in the
worker, for kevin_tui.usermodel.check).

Both models get the same loss: each output's mean squared distance from a fixed random target (so
every output value counts, and steps on it stay finite). Compared: the gradient of every parameter
and floating input; K optimizer steps of SGD and of AdamW from the same state (the losses on the way,
the parameters after, the outputs without gradients before and after them); torch.compile's graph
breaks (torch._dynamo.explain) and the compiled model's output and gradients; and the bytes autograd
saves for the backward.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from kevin_tui.evaluator.worker.common import graph_breaks
from kevin_tui.usermodel.loader import UserModelError, where

Compare = Callable[[Any, Any, str], tuple[str | None, float]]
# The difference of two outputs (or gradients) that no distance compares: another structure, dtype or shape, a
# gradient missing, NaN where the other is a number. Infinite, so no bar on a difference lets them through.
UNCOMPARABLE = math.inf
OPTIMIZERS: dict[str, Callable[[Any], torch.optim.Optimizer]] = {
    "SGD": lambda parameters: torch.optim.SGD(parameters, lr=0.01, momentum=0.9),
    "AdamW": lambda parameters: torch.optim.AdamW(parameters, lr=1e-3),
}


def floating(value: Any) -> list[torch.Tensor]:
    """The floating tensors in an output (nested in tuples, lists and dicts), in order."""
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, list | tuple):
        return [t for v in value for t in floating(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in floating(v)]
    return []


def loss_weights(output: Any, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(t.shape, generator=generator).to(t.device, t.dtype) for t in floating(output)]


def weighted_loss(output: Any, targets: list[torch.Tensor]) -> torch.Tensor:
    """The mean squared distance of each floating output from its fixed random target: bounded below,
    so optimizer steps on it stay finite, and its gradient is a random direction in every value."""
    tensors = floating(output)
    if not tensors:
        raise UserModelError("the model's output has no floating tensor: there is nothing to differentiate")
    return torch.stack([((t.float() - w.float()) ** 2).mean() for t, w in zip(tensors, targets, strict=True)]).sum()


def trainable(model: nn.Module, args: list[Any]) -> bool:
    """Whether gradients can flow: a parameter that needs one, or a floating input."""
    return any(p.requires_grad for p in model.parameters()) or any(
        isinstance(a, torch.Tensor) and a.is_floating_point() for a in args
    )


def graded(model: nn.Module, args: list[Any], run: Callable[..., Any] | None = None) -> tuple[list[Any], Any]:
    """Copies of `args`, the floating ones needing a gradient, and the model's output on them with its graph, for
    `backward` (the model's gradients cleared first); `run` calls the model (its compiled form) when given."""
    inputs = [a.detach().clone().requires_grad_() if _is_float(a) else a for a in args]
    model.zero_grad(set_to_none=True)
    with torch.enable_grad():
        return inputs, (model if run is None else run)(*inputs)


def backward(
    model: nn.Module, inputs: list[Any], output: Any, weights: list[torch.Tensor]
) -> tuple[float, dict[str, Any]]:
    """The loss of `graded`'s output and the gradient of every parameter needing one and every floating input
    (None: none came)."""
    with torch.enable_grad():
        loss = weighted_loss(output, weights)
        if loss.requires_grad:
            loss.backward()
    found = {f"parameter {n}": p.grad for n, p in model.named_parameters() if p.requires_grad}
    found |= {f"input {i}": a.grad for i, a in enumerate(inputs) if _is_float(a)}
    return loss.item(), found


def gradients(
    model: nn.Module, args: list[Any], weights: list[torch.Tensor], run: Callable[..., Any] | None = None
) -> tuple[float, dict[str, Any]]:
    """`backward` of `graded`: the loss and the gradients, from one call of the model."""
    return backward(model, *graded(model, args, run), weights)


def _is_float(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def compare_gradients(expected: dict[str, Any], got: dict[str, Any], compare: Compare) -> tuple[str | None, float]:
    """Why the gradients differ (a missing one first: the kernel cut the graph), and the largest difference."""
    if expected.keys() != got.keys():
        return f"the gradients are of {sorted(got)}, the model's of {sorted(expected)}", UNCOMPARABLE
    missing = [name for name in expected if got[name] is None and expected[name] is not None]
    if missing:
        return f"no gradient reaches {', '.join(missing)} (the kernel cuts the graph)", UNCOMPARABLE
    worst = 0.0
    for name, value in expected.items():
        if value is None:
            continue
        why, difference = compare(value, got[name], f"the gradient of {name}")
        if why:
            return why, difference
        worst = max(worst, difference)
    return None, worst


def untracked_outputs_differ(models: dict[str, nn.Module], args: list[Any], compare: Compare, at: str) -> str | None:
    """Why the two models' outputs differ when called without gradients (a validation pass, before the optimizer
    steps and after them), or None. Every call after the steps tracked gradients, so a kernel keeping the weights it
    converted in its first call without gradients, and never looking at them again, passed with the weights of
    before training (tests/candidates/redteam22/linear_nograd_weight_cache_apply.py)."""
    outputs = {}
    for which, model in models.items():
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(0)
            try:
                outputs[which] = model(*args)
            except Exception as exc:
                if which == "before":
                    return None  # the model itself does not run so: nothing to compare
                return f"{at}: the model with the kernel raises {where(exc)}"
    return compare(outputs["before"], outputs["after"], at)[0]


def optimizer_steps(
    before: nn.Module, after: nn.Module, args: list[Any], weights: list[torch.Tensor], steps: int, compare: Compare
) -> tuple[dict[str, Any], str | None]:
    """Each optimizer's losses over `steps` steps from the same state, with and without the kernel, and
    the largest parameter difference after them; why they differ (None when they match)."""
    figures: dict[str, Any] = {}
    for name, make in OPTIMIZERS.items():
        models = {"before": copy.deepcopy(before), "after": copy.deepcopy(after)}
        losses: dict[str, list[float]] = {"before": [], "after": []}
        if why := untracked_outputs_differ(models, args, compare, f"the output without gradients before {name} steps"):
            return figures, why
        for which, model in models.items():
            optimizer = make(model.parameters())
            for _ in range(steps):
                loss, _ = gradients(model, args, weights)
                optimizer.step()
                losses[which].append(loss)
        figures[name] = {"losses_before": losses["before"], "losses_after": losses["after"], "max_param_diff": 0.0}
        expected = dict(models["before"].named_parameters())
        got = dict(models["after"].named_parameters())
        for key, value in expected.items():
            why, difference = compare(value.detach(), got[key].detach(), f"{key} after {steps} {name} steps")
            figures[name]["max_param_diff"] = max(figures[name]["max_param_diff"], difference)
            if why:
                return figures, why
        if why := untracked_outputs_differ(models, args, compare, f"the output without gradients after {steps} {name} "
                                           "steps"):  # fmt: skip
            return figures, why
        dtype = weights[0].dtype  # the losses are as exact as the outputs they sum
        why, _ = compare(torch.tensor(losses["before"], dtype=dtype), torch.tensor(losses["after"], dtype=dtype),
                         f"the {name} losses")  # fmt: skip
        if why:
            return figures, why
    return figures, None


def compiled(
    before: nn.Module,
    after: nn.Module,
    args: list[Any],
    expected: Any,
    expected_grads: dict[str, Any],
    weights: list[torch.Tensor],
    compare: Compare,
) -> tuple[dict[str, Any], str | None]:
    """torch.compile of the model with the kernel: graph breaks, output and gradients against the
    eager model without it; why it fails (None when it matches). Where they differ, the model
    without the kernel is compiled too: a difference torch.compile makes by itself (inductor computes
    bf16 in float32) is the bar, not the kernel's. The output and the gradients are both compared, and
    only a difference in values can be within that bar: a gradient missing under compile, another dtype
    or shape, NaN where eager has a number never is (they passed as a difference of 0 before)."""
    try:
        explanation, output, grads = compile_and_run(after, args, weights)
    except Exception as exc:
        return {"error": where(exc)}, f"torch.compile of the model with the kernel fails: {where(exc)}"
    figures: dict[str, Any] = {
        "graph_breaks": graph_breaks(explanation),
        "graphs": explanation.graph_count,
        "break_reasons": [str(r.reason) for r in explanation.break_reasons][:3],
    }
    why_output, figures["max_abs_diff"] = compare(expected, output, "the compiled output")
    why_grads, figures["max_grad_diff"] = compare_gradients(expected_grads, grads, compare)
    why = why_output or why_grads
    if why is None:
        return figures, None
    _, plain_output, plain_grads = compile_and_run(before, args, weights)
    _, itself = compare(expected, plain_output, "")
    _, itself_grads = compare_gradients(expected_grads, plain_grads, compare)
    figures["compile_itself"] = max(itself, itself_grads)
    worst = max(figures["max_abs_diff"], figures["max_grad_diff"])
    if math.isfinite(worst) and worst <= 2 * figures["compile_itself"]:
        return figures, None
    return figures, f"compiled: {why} (torch.compile without the kernel differs by {figures['compile_itself']:.3g})"


def compile_and_run(model: nn.Module, args: list[Any], weights: list[torch.Tensor]) -> tuple[Any, Any, dict]:
    """torch._dynamo.explain's account of a copy of the model, and its compiled output and gradients."""
    import torch._dynamo

    model = copy.deepcopy(model)
    torch._dynamo.reset()
    with torch.no_grad():
        explanation = torch._dynamo.explain(model)(*args)
    torch._dynamo.reset()
    fast = torch.compile(model)
    with torch.no_grad():
        output = fast(*args)
    _, grads = gradients(model, args, weights, fast)
    return explanation, output, grads


def saved_bytes(model: nn.Module, args: list[Any]) -> int:
    """What autograd keeps for the backward of one call, beyond the parameters (which it keeps anyway)."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    inputs = [a.detach().clone().requires_grad_() if _is_float(a) else a for a in args]
    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(*inputs)
    return sum(saved.values())
