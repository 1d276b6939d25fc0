"""Loading your module in the worker: import it with your project on the path, build it, feed it.

Runs in the worker process (kevin_tui.usermodel.worker), which imports torch and your code. Every
fault the user can fix is a `UserModelError` with one line: no such class, no forward, arguments or
inputs that do not fit, a module whose state or output changes from one call to the next.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import traceback
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from kevin_tui.usermodel.bundle import import_root, module_name
from kevin_tui.usermodel.specs import InputSpec, Target, TensorSpec


class UserModelError(Exception):
    """Something about the user's module that cannot work; one line for the user."""


def search_roots(path: Path) -> list[Path]:
    """Where your modules are imported from: the file's package root, then the current directory."""
    return list(dict.fromkeys([import_root(path), Path.cwd().resolve()]))


def import_file(path: Path) -> ModuleType:
    for root in reversed(search_roots(path)):
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
    name = module_name(path)
    try:
        module = importlib.import_module(name)
    except Exception as exc:
        raise UserModelError(f"importing {path} raised {where(exc)}") from None
    if Path(getattr(module, "__file__", "") or "").resolve() != path.resolve():
        raise UserModelError(f"{path} cannot be imported as {name}: that name is taken by {module.__file__ or name}; "
                             "rename the file")  # fmt: skip
    return module


def where(exc: BaseException) -> str:
    """`ValueError: msg (blocks.py:42 in forward)`: the exception and the last frame in your code."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "site-packages" not in f.filename
              and "/kevin_tui/" not in f.filename]  # fmt: skip
    place = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}{place}"


def is_module_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, nn.Module)


def resolve(target: Target) -> Any:
    """The class or function a target names; a file's only nn.Module class when it names none."""
    module = import_file(target.path)
    if target.name is not None:
        if not hasattr(module, target.name):
            raise UserModelError(f"{target.path} defines no {target.name}")
        return getattr(module, target.name)
    classes = [v for v in vars(module).values() if is_module_class(v) and v.__module__ == module.__name__]
    if len(classes) != 1:
        found = ", ".join(c.__name__ for c in classes) or "none"
        raise UserModelError(f"{target.path} defines {len(classes)} nn.Module classes ({found}): name one, "
                             f"e.g. {target.path}:{classes[0].__name__ if classes else 'Model'}")  # fmt: skip
    return classes[0]


def has_forward(cls: type) -> bool:
    return getattr(cls, "forward", None) is not getattr(nn.Module, "forward", None)


def build(target: Target, obj: Any, arguments: dict[str, Any]) -> nn.Module:
    """Your module: the class built with `arguments`, or what the factory returns when called with them."""
    what = target.name or getattr(obj, "__name__", "?")
    call = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    if is_module_class(obj):
        if not has_forward(obj):
            raise UserModelError(f"{obj.__name__} has no forward(): nothing to run")
        _bind(obj, arguments, f"{obj.__name__}({call})")
    elif callable(obj) and not isinstance(obj, type):
        _bind(obj, arguments, f"{what}({call})")
    else:
        raise UserModelError(f"{target.text()} is a {type(obj).__name__}, not an nn.Module class or a function "
                             "that returns one")  # fmt: skip
    try:
        module = obj(**arguments)
    except Exception as exc:
        raise UserModelError(f"building {what}({call}) raised {where(exc)}") from None
    if not isinstance(module, nn.Module):
        raise UserModelError(f"{what}({call}) returned a {type(module).__name__}, not an nn.Module")
    if not has_forward(type(module)):
        raise UserModelError(f"{type(module).__name__} has no forward(): nothing to run")
    return module


def _bind(fn: Any, arguments: dict[str, Any], call: str) -> None:
    try:
        inspect.signature(fn).bind(**arguments)
    except TypeError as exc:
        raise UserModelError(f"{call} does not fit {describe_signature(fn)}: {exc}") from None


def describe_signature(fn: Any) -> str:
    name = getattr(fn, "__name__", "?")
    try:
        return f"{name}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        return name


def forward_parameters(module: nn.Module) -> list[inspect.Parameter]:
    return list(inspect.signature(module.forward).parameters.values())


def draw(spec: InputSpec, batch_size: int | None = None) -> Any:
    """The value the problem's get_inputs() draws for this spec (the same expression, evaluated), with its
    leading size `batch_size` if given (specs.first_dim_name: the problem's batch_size)."""
    leading = {(0, spec.shape[0]): "batch_size"} if batch_size and isinstance(spec, TensorSpec) else None
    expression = spec.expression(leading)
    return eval(expression, {"torch": torch, "batch_size": batch_size})  # our own expression, from a parsed spec


def ordered_inputs(module: nn.Module, specs: list[InputSpec]) -> list[InputSpec]:
    """The specs in the order forward takes them, named after its parameters (given names are matched
    to them; unnamed specs fill them in order)."""
    name = type(module).__name__
    parameters = forward_parameters(module)
    if not specs or specs[0].name is None:
        positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        rest = next((p.name for p in parameters if p.kind is p.VAR_POSITIONAL), None)
        required = [p for p in positional if p.default is p.empty]
        if len(specs) < len(required) or (rest is None and len(specs) > len(positional)):
            signature = inspect.signature(module.forward)
            raise UserModelError(f"{len(specs)} input(s) do not fit {name}.forward{signature}")
        names = [p.name for p in positional] + [f"{rest}{i}" for i in range(len(specs) - len(positional))]
        return [replace(s, name=n) for s, n in zip(specs, names, strict=False)]
    by_name = {s.name: s for s in specs if s.name is not None}  # all are named (parse_inputs: all or none)
    ordered: list[InputSpec] = []
    for parameter in parameters:
        if parameter.name in by_name:
            if parameter.kind is parameter.KEYWORD_ONLY:
                raise UserModelError(f"{name}.forward takes {parameter.name} by keyword only; KernelBench passes "
                                     "inputs in order")  # fmt: skip
            if len(ordered) < [p.name for p in parameters].index(parameter.name):
                skipped = [p.name for p in parameters[len(ordered) :] if p.name not in by_name]
                raise UserModelError(f"{name}.forward's input(s) {', '.join(skipped)} come before "
                                     f"{parameter.name}: give them too")  # fmt: skip
            ordered.append(by_name.pop(parameter.name))
        elif parameter.default is parameter.empty and parameter.kind in (parameter.POSITIONAL_ONLY,
                                                                         parameter.POSITIONAL_OR_KEYWORD):  # fmt: skip
            raise UserModelError(f"no input given for {name}.forward's {parameter.name}")
    if by_name:
        takes = ", ".join(p.name for p in parameters)
        raise UserModelError(f"{name}.forward has no input {', '.join(by_name)} (it takes {takes})")
    return ordered


def run_forward(module: nn.Module, args: list[Any]) -> Any:
    try:
        with torch.no_grad():
            return module(*args)
    except Exception as exc:
        shapes = ", ".join(_describe(a) for a in args)
        raise UserModelError(
            f"the inputs do not fit {type(module).__name__}.forward ({shapes}): {where(exc)}"
        ) from None


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    return repr(value)


def check_steady(module: nn.Module, args: list[Any]) -> Any:
    """Run forward twice on the same inputs: its state and its output must not change (a kernel is
    checked against it call by call). Returns the output."""
    before = {k: v.detach().clone() for k, v in module.state_dict().items()}
    first = run_forward(module, args)
    second = run_forward(module, args)
    name = type(module).__name__
    for key, value in module.state_dict().items():
        if key not in before or not torch.equal(before[key], value):
            raise UserModelError(f"{name} changes its state when it runs ({key} changed): a kernel needs a forward "
                                 "that leaves the module as it was (BatchNorm and the like: --mode eval)")  # fmt: skip
    if not same_output(first, second):
        raise UserModelError(f"{name} gives different outputs for the same inputs (dropout or other randomness? "
                             "--mode eval turns dropout off)")  # fmt: skip
    return first


def same_output(a: Any, b: Any) -> bool:
    """Equal, or for floats within what reordered sums give (GPU reductions may run in another order)."""
    if isinstance(a, torch.Tensor):
        if not (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype):
            return False
        if not a.is_floating_point() or a.numel() == 0:
            return torch.equal(a, b)
        a, b = a.double(), b.double()
        scale = a.nan_to_num(0, 0, 0).abs().max().item()
        return torch.allclose(a, b, rtol=1e-5, atol=1e-6 * scale, equal_nan=True)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same_output(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_output(a[k], b[k]) for k in a)
    return a == b
