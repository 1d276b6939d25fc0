"""An accepted Kevin kernel, installed in your model: `install(model)` swaps each instance of CLASS
for the kernel's ModelNew, carrying the same parameters and buffers (its state dict).

Written by `kevin-tui apply` beside the kernel, and committed with it; the settings below say which
kernel and which class. Only instances built like the problem the kernel was made for are swapped
(the same parameter and buffer shapes, the same plain settings); any other is left as it is, with a
warning. Nothing changes at import: call it where the model is built.

    from problems.blocks_GeluGate_apply import install
    model = install(model)

The switch: KEVIN_TUI_KERNELS=off in the environment (or `install(model, enabled=False)`) leaves
every model exactly as it is.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import warnings
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

# -- settings, written by kevin-tui apply --
KERNEL = "model_kernel.py"  # the accepted kernel, relative to this file: it defines ModelNew
PROBLEM = "model_problem.py"  # the problem it was made for: its get_init_inputs() are the arguments
CLASS = "Model"  # the class of yours it replaces
SOURCE = "model.py"  # the file that defines CLASS, relative to this file
# -- end of settings --

ENABLED = os.environ.get("KEVIN_TUI_KERNELS", "on").lower() not in ("off", "0", "false", "no")
HERE = Path(__file__).resolve().parent


def install(model: nn.Module, enabled: bool = ENABLED) -> nn.Module:
    """`model` with its matching CLASS instances swapped for ModelNew; the model itself is returned
    (or its replacement, when the model is an instance of CLASS)."""
    if not enabled:
        return model
    replaced: list[str] = []
    for path, module, why_not in matches(model):
        if why_not is not None:
            warnings.warn(f"kevin-tui kernel: {path or 'the model'} is left as it is: {why_not}", stacklevel=2)
            continue
        if any(path.startswith(f"{done}.") for done in replaced):
            continue  # inside an instance already swapped
        new = replacement(module)
        if not path:
            return new
        parent, _, name = path.rpartition(".")
        setattr(model.get_submodule(parent), name, new)
        replaced.append(path)
    return model


def matches(model: nn.Module) -> list[tuple[str, nn.Module, str | None]]:
    """Each instance of CLASS in the model (path, module) and why it cannot be swapped (None: it can)."""
    found = [(path, module) for path, module in model.named_modules() if is_original(type(module))]
    if not found:
        return []
    made_for = built_for_kernel(type(found[0][1]))
    return [(path, module, difference(module, made_for)) for path, module in found]


def is_original(cls: type) -> bool:
    if cls.__qualname__ != CLASS:
        return False
    try:
        source = inspect.getsourcefile(cls)
    except TypeError:  # a built-in class
        return False
    return source is not None and Path(source).resolve() == (HERE / SOURCE).resolve()


def built_for_kernel(cls: type) -> nn.Module:
    """CLASS built with the kernel's arguments, without memory for its weights where that works."""
    arguments = loaded(PROBLEM).get_init_inputs()
    try:
        with torch.device("meta"):
            return cls(*arguments)
    except Exception:
        return cls(*arguments)


def difference(module: nn.Module, made_for: nn.Module) -> str | None:
    ours, theirs = module.state_dict(), made_for.state_dict()
    if ours.keys() != theirs.keys():
        return "its parameters and buffers are not the ones the kernel was made for"
    for key, value in ours.items():
        if value.shape != theirs[key].shape:
            return f"{key} is {tuple(value.shape)}; the kernel was made for {tuple(theirs[key].shape)}"
    for key, value in vars(made_for).items():
        plain = isinstance(value, int | float | bool | str | tuple | type(None))
        if plain and not key.startswith("_") and key != "training" and getattr(module, key, value) != value:
            return f"{key} is {getattr(module, key)!r}; the kernel was made for {value!r}"
    return None


def replacement(module: nn.Module) -> nn.Module:
    """ModelNew with the module's state dict, on its device and in its dtype and mode."""
    new = loaded(KERNEL).ModelNew(*loaded(PROBLEM).get_init_inputs())
    tensors = [*module.parameters(), *module.buffers()]
    floating = [t.dtype for t in tensors if t.is_floating_point()]
    if tensors:
        new = new.to(tensors[0].device)
    if floating:
        new = new.to(floating[0])
    try:
        new.load_state_dict(module.state_dict())
    except RuntimeError as exc:
        raise RuntimeError(f"ModelNew does not hold {CLASS}'s parameters and buffers under the same names and "
                           f"shapes, so it cannot take them over: {exc}") from None  # fmt: skip
    return new.train(module.training)


@functools.cache
def loaded(name: str) -> ModuleType:
    """The kernel or its problem, imported once (the kernel builds its extension, or loads it from
    torch's cache)."""
    path = HERE / name
    spec = importlib.util.spec_from_file_location(f"kevin_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
