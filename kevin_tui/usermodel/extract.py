"""A built module of yours as a problem file, checked against the module itself (runs in the worker).

The problem is written from the instance: its class, the arguments it was built with (recorded by
capture.InitRecorder), the inputs it was called with (as specs), its train/eval mode. Then it is
proven: the problem's Model, built from get_init_inputs() and given the instance's state dict,
must give the instance's output on the same inputs, and get_inputs() must draw inputs of the same
kinds. A problem that does not is never written.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kevin_tui.evaluator.worker.common import import_file
from kevin_tui.usermodel.bundle import relative_path
from kevin_tui.usermodel.capture import Call, NotWritable, in_order, is_users, source_file, spec_of, write
from kevin_tui.usermodel.loader import UserModelError, check_steady, forward_parameters, same_output, where
from kevin_tui.usermodel.problem_text import ProblemSpec, problem_file_name, problem_text
from kevin_tui.usermodel.specs import InputSpec, SpecError


def problem_spec(
    module: nn.Module, init: Call | None, inputs: list[InputSpec], roots: list[Path], root: Path, target: str | None
) -> ProblemSpec:
    """What the problem is made of; raises NotWritable when a part cannot be written as Python."""
    cls = type(module)
    class_file = source_file(cls)
    if class_file is None or not is_users(cls, roots):
        raise NotWritable(f"{cls.__module__}.{cls.__qualname__} is not a class of your code")
    if init is None:
        raise NotWritable(f"how {cls.__name__} was built is unknown (it was built before kevin-tui could see it)")
    needs: list[tuple[Path, str]] = []
    arguments = [(name, write(value, roots, needs)) for name, value in in_order(cls, init, cls.__name__)]
    return ProblemSpec(
        target=target or f"{relative_path(class_file, root)}:{cls.__qualname__}",
        class_file=class_file,
        class_name=cls.__qualname__,
        init=arguments,
        inputs=inputs,
        training=module.training,
        needs=needs,
    )


def input_specs(module: nn.Module, call: Call) -> tuple[list[InputSpec], list[Any]]:
    """The specs of a recorded forward call, and its values in the order forward takes them."""
    ordered = in_order(module.forward, call, f"{type(module).__name__}.forward")
    return [spec_of(name, value) for name, value in ordered], [value for _, value in ordered]


def write_and_check(
    spec: ProblemSpec, module: nn.Module, args: list[Any], roots: list[Path], root: Path, problems_dir: Path
) -> tuple[str, str]:
    """The problem's file name and text, once proven to compute what `module` computes on `args`."""
    try:
        text = problem_text(spec, roots, root, problems_dir)
    except SpecError as exc:
        raise UserModelError(str(exc)) from None
    expected = check_steady(module, args)
    with tempfile.TemporaryDirectory(prefix="kevin-problem-") as directory:
        path = Path(directory) / problem_file_name(spec)
        path.write_text(text)
        problem = _import(path)
        try:
            torch.manual_seed(0)
            model = problem.Model(*problem.get_init_inputs())
            model.load_state_dict(module.state_dict())
            model.to(_device_of(module, args))
            drawn = problem.get_inputs()
            with torch.no_grad():
                got = model(*args)
        except Exception as exc:
            raise UserModelError(f"the problem written for {spec.target} does not run: {where(exc)}") from None
    if not same_output(expected, got):
        raise UserModelError(f"the problem written for {spec.target} computes something else than your module")
    for name, value, made in zip((p.name for p in forward_parameters(module)), args, drawn, strict=False):
        if _kind(value) != _kind(made):
            raise UserModelError(f"the problem's get_inputs() draws {name} as {_kind(made)}, not {_kind(value)}")
    return path.name, text


def _import(path: Path) -> Any:
    try:
        return import_file(path, f"kevin_problem_{abs(hash(path))}")
    except Exception as exc:
        raise UserModelError(f"the problem written for {path.stem} does not import: {where(exc)}") from None


def _device_of(module: nn.Module, args: list[Any]) -> torch.device:
    tensors = [*module.parameters(), *module.buffers(), *(a for a in args if isinstance(a, torch.Tensor))]
    return tensors[0].device if tensors else torch.device("cpu")


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    return repr(value)
