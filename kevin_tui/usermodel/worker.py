"""The worker: `python -m kevin_tui.usermodel.worker COMMAND` reads a JSON request on stdin and writes
one JSON answer on stdout. It imports torch and your code, so kevin-tui itself never does.

Commands: `problem` (a module of yours as a problem file, proven), `profile` (where the model's time
goes, and a proven problem for each of your modules in it), `check` (the model before and after
`install`, see kevin_tui.usermodel.check). A fault of yours is `{"error": "one line"}`; your code's
prints go to stderr, never into the answer.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import secrets
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kevin_tui.evaluator.worker import common
from kevin_tui.usermodel import profiling
from kevin_tui.usermodel.capture import InitRecorder, InputRecorder, NotWritable, is_users
from kevin_tui.usermodel.check import check
from kevin_tui.usermodel.extract import grad_output_spec, input_specs, problem_spec, running_as, write_and_check
from kevin_tui.usermodel.loader import (
    UserModelError,
    build,
    draw,
    ordered_inputs,
    resolve,
    run_forward,
    search_roots,
    where,
)
from kevin_tui.usermodel.problem_text import ProblemSpec
from kevin_tui.usermodel.specs import (
    InputSpec,
    SpecError,
    TensorSpec,
    first_dim_name,
    parse_init,
    parse_inputs,
    parse_target,
)

SEED = 0


def resolve_device(requested: str) -> str:
    """As the evaluator reads --device (the first GPU for auto); no GPU for cuda is a one-line error."""
    try:
        return common.resolve_device(requested)
    except common.EnvironmentProblem as exc:
        raise UserModelError(str(exc)) from None


@dataclass
class Loaded:
    module: nn.Module
    specs: list[InputSpec]  # in the order forward takes them
    args: list[Any]  # drawn from the specs, on the device
    recorder: InitRecorder  # how each module of yours was built
    roots: list[Path]
    device: str


def load_model(request: dict[str, Any]) -> Loaded:
    """The model (built while its construction is watched) and its inputs on the device."""
    target = parse_target(request["target"])
    roots = search_roots(target.path)
    obj = resolve(target)
    recorder = InitRecorder(roots)
    torch.manual_seed(SEED)
    module = build(target, obj, parse_init(request.get("init")))
    if request.get("mode"):
        module.train(request["mode"] == "train")
    device = resolve_device(request.get("device", "cpu"))
    specs = ordered_inputs(module, parse_inputs(request.get("inputs")))
    torch.manual_seed(SEED)
    args = [_to(draw(s), device) for s in specs]
    return Loaded(module.to(device), specs, args, recorder, roots, device)


def _to(value: Any, device: str) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


def fresh_inputs(specs: list[InputSpec], device: str) -> list[tuple[str, list[Any]]]:
    """Inputs a kernel cannot have been fitted to, for the gradient check: new values from a secret seed at the
    check's shapes and dtypes (the check's own are drawn at the fixed SEED), where every tensor input shares
    its leading size (a batch) twice that size, and `odd_shapes`."""
    batch = next((s.shape[0] for s in specs if isinstance(s, TensorSpec)), None) if first_dim_name(specs) else None
    found = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(secrets.randbits(63))
        found.append(("new values", [_to(draw(s), device) for s in specs]))
        if batch:
            found.append((f"batch size {2 * batch}", [_to(draw(s, 2 * batch), device) for s in specs]))
        for shaped in odd_shapes(specs):
            label = "odd sizes " + ", ".join("x".join(map(str, s.shape)) for s in shaped if isinstance(s, TensorSpec))
            found.append((label, [_to(draw(s), device) for s in shaped]))
    return found


def odd_shapes(specs: list[InputSpec]) -> list[list[InputSpec]]:
    """The specs with each even size made odd (n - 1), as eval's other sizes break tiling: every size, and every
    size but the last (a size the parameters fix, a Linear's features); each only where it changes a shape. The
    check's batch and twice it are whole tiles of a kernel tiled for the check's sizes: one that never wrote the
    rows of a partial tile of 8 passed and was wrong at any other sequence length
    (tests/candidates/redteam26/gelu_gate_rows_in_tiles_of_eight_apply.py)."""
    found: list[list[InputSpec]] = []
    for kept in (0, 1):
        shaped = [
            dataclasses.replace(s, shape=tuple(
                n - 1 if n % 2 == 0 and i < len(s.shape) - kept else n for i, n in enumerate(s.shape)
            )) if isinstance(s, TensorSpec) else s
            for s in specs
        ]  # fmt: skip
        if shaped != specs and shaped not in found:
            found.append(shaped)
    return found


def sampler(specs: list[InputSpec], device: str) -> Callable[[], list[Any]]:
    """A new sample of the check's inputs for every timed call, each from its own secret seed: on values that only
    change a little between calls, a kernel that diffs its input against one it kept and updates that answer (a
    row of a linear layer for one value changed) read 7.7x for a 1x linear
    (tests/candidates/redteam20/incremental_memo_apply.py); a fresh sample leaves it nothing to start from."""
    seeds = random.Random(secrets.randbits(64))

    def sample() -> list[Any]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seeds.getrandbits(63))
            return [_to(draw(s), device) for s in specs]

    return sample


def command_problem(request: dict[str, Any]) -> dict[str, Any]:
    loaded, root = load_model(request), Path(request["root"])
    module = loaded.module
    try:
        init = loaded.recorder.calls.get(module)
        spec = problem_spec(module, init, loaded.specs, loaded.roots, root, request["target"])
    except NotWritable as exc:
        raise UserModelError(f"cannot write a problem for {request['target']}: {exc}") from None
    if request.get("backward"):
        spec.grad_output = grad_output_spec(run_forward(module, loaded.args))
    name, text = write_and_check(spec, module, loaded.args, loaded.roots, root, Path(request["problems_dir"]))
    return {"file_name": name, "text": text, "class": spec.class_name}


def command_profile(request: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    loaded = load_model(request)
    model, args, device = loaded.module, loaded.args, loaded.device
    run_forward(model, args)  # warm-up, and a clear error if the inputs do not fit
    plain_ms = profiling.time_calls(model, args, device)
    paths = {id(m): name or type(m).__name__ for name, m in model.named_modules() if is_users(type(m), loaded.roots)}
    inputs = InputRecorder([m for m in model.modules() if id(m) in paths])
    run_forward(model, args)
    inputs.close()
    trace = profiling.take_trace(model, args, device, paths, int(request.get("calls", 5)))
    total_ms, times = profiling.module_times(trace)
    rows = _module_rows(loaded, paths, inputs, times, total_ms, request)
    return {
        "target": request["target"],
        "device": device,
        "gpu": torch.cuda.get_device_name(device) if device.startswith("cuda") else None,
        "torch": torch.__version__,
        "total_ms": total_ms,
        "timing": profiling.overhead(plain_ms, trace.call_ms),
        "calls": trace.calls,
        "modules": rows,
        "operators": profiling.operators(trace, total_ms),
        "seconds": time.perf_counter() - started,
    }


def _module_rows(
    loaded: Loaded,
    paths: dict[int, str],
    inputs: InputRecorder,
    times: dict[str, list[tuple[float, float]]],
    total_ms: float,
    request: dict[str, Any],
) -> list[dict[str, Any]]:
    """One row per class of yours built the same way and called with the same kinds of inputs, by self
    time, with a proven problem for it (or why there is none)."""
    calls, roots, root = int(request.get("calls", 5)), loaded.roots, Path(request["root"])
    groups: dict[tuple, list[nn.Module]] = defaultdict(list)
    made: dict[tuple, tuple[Any, Any]] = {}
    key: tuple  # (its problem's parts) or (its class, why it cannot be written)
    for module in loaded.module.modules():
        call = inputs.calls.get(id(module))
        if call is None:
            continue  # not yours, or built but never called
        try:
            specs, values = input_specs(module, call)
            init, autocast = loaded.recorder.calls.get(module), inputs.autocast.get(id(module))
            spec = problem_spec(module, init, specs, roots, root, None, autocast)
            key = (spec.class_file, spec.class_name, tuple(spec.init), tuple(s.text() for s in specs), spec.training,
                   spec.dtype, spec.autocast)  # fmt: skip
            made.setdefault(key, (spec, values))
        except NotWritable as exc:
            key = (type(module), str(exc))
            made.setdefault(key, (None, str(exc)))
        groups[key].append(module)
    model = {k: request[k] for k in ("target", "init", "inputs", "mode") if request.get(k)}
    rows: list[dict[str, Any]] = []
    for key, modules in groups.items():
        spec, values = made[key]
        measured = [t for m in modules for t in times.get(paths[id(m)], [])]
        row: dict[str, Any] = {
            "backward_ms": None, "backward_file_name": None, "backward_problem": None, "backward_why_not": None,
            "class": type(modules[0]).__qualname__,
            "paths": [paths[id(m)] for m in modules],
            "calls": len(measured) / calls,
            "total_ms": sum(t for t, _ in measured) / calls,
            "self_ms": sum(s for _, s in measured) / calls,
            "inputs": [], "init": {}, "problem": None, "file_name": None, "why_not": None,
        }  # fmt: skip
        row["share"] = row["total_ms"] / total_ms if total_ms else 0.0
        row["self_share"] = row["self_ms"] / total_ms if total_ms else 0.0
        if spec is None:
            row["why_not"] = values
        else:
            spec.model = model
            row.update(inputs=[s.text() for s in spec.inputs], init=dict(spec.init))
            try:
                made_for = (spec, modules[0], values, roots, root, Path(request["problems_dir"]))
                row["file_name"], row["problem"] = write_and_check(*made_for)
            except UserModelError as exc:
                row["why_not"] = str(exc)
            if request.get("backward") and row["problem"] is not None:
                row.update(_backward(spec, modules[0], values, loaded, root, Path(request["problems_dir"])))
        rows.append(row)
    rows.sort(key=lambda r: -r["self_ms"])
    return rows


def _backward(
    spec: ProblemSpec, module: nn.Module, values: list[Any], loaded: Loaded, root: Path, problems_dir: Path
) -> dict[str, Any]:
    """With --backward: the module's backward timed alone, and its backward problem (the vector-Jacobian
    product, as `optimize FILE.py:Class --backward` writes it), proven like the forward's."""
    found: dict[str, Any] = {}
    try:
        with running_as(spec, values):
            found["backward_ms"] = profiling.time_backward(module, values, loaded.device)
            output = run_forward(module, values)
        backward = dataclasses.replace(spec, grad_output=grad_output_spec(output))
        found["backward_file_name"], found["backward_problem"] = write_and_check(
            backward, module, values, loaded.roots, root, problems_dir
        )
    except UserModelError as exc:
        found["backward_why_not"] = str(exc)
    except RuntimeError as exc:  # no gradient flows through it (nothing of it requires one)
        found["backward_why_not"] = f"its backward does not run: {where(exc)}"
    return found


def command_check(request: dict[str, Any]) -> dict[str, Any]:
    loaded = load_model(request)
    fresh = fresh_inputs(loaded.specs, loaded.device)
    return {"device": loaded.device, **check(loaded.module, loaded.args, Path(request["helper"]), loaded.device,
                                             request, fresh, draw=sampler(loaded.specs, loaded.device))}  # fmt: skip


COMMANDS = {"problem": command_problem, "profile": command_profile, "check": command_check}


def main() -> None:
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # your code's prints go to stderr; the answer alone goes to stdout
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.read())
    try:
        answer = COMMANDS[sys.argv[1]](request)
    except (UserModelError, SpecError) as exc:
        answer = {"error": str(exc)}
    with os.fdopen(answer_fd, "w") as out:
        out.write(json.dumps(answer))


if __name__ == "__main__":
    main()
