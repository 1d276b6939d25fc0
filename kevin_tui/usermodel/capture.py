"""What your model does as it is built and run: each module's constructor arguments and first inputs,
and how to write them back as Python (a problem's get_init_inputs() and get_inputs()).

Runs in the worker. Constructor arguments cannot be read off a built module, so the classes of your
code get an `__init__` that records the arguments of the outermost call (the one `YourClass(...)`
makes) before the model is built; inputs are recorded by forward pre-hooks on the first call.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import weakref
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from kevin_tui.usermodel.specs import DTYPES, Distribution, InputSpec, TensorSpec, ValueSpec, default_distribution

Call = tuple[tuple[Any, ...], dict[str, Any]]


class NotWritable(Exception):
    """A value a problem file cannot hold (the message says what it is)."""


def source_file(obj: Any) -> Path | None:
    try:
        found = inspect.getsourcefile(obj)
    except TypeError:
        return None
    return Path(found).resolve() if found else None


def is_users(obj: Any, roots: list[Path]) -> bool:
    """Defined in your code: in a file under one of `roots` that is not an installed package."""
    path = source_file(obj)
    if path is None or "site-packages" in path.parts or "dist-packages" in path.parts:
        return False
    return any(path.is_relative_to(root) for root in roots) and not path.is_relative_to(Path(__file__).parents[1])


def _subclasses(cls: type[nn.Module]) -> list[type[nn.Module]]:
    found: list[type[nn.Module]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


class InitRecorder:
    """The arguments each instance of your nn.Module classes is built with (install before building)."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self.calls: weakref.WeakKeyDictionary[nn.Module, Call] = weakref.WeakKeyDictionary()
        self.depth: dict[int, int] = {}
        for cls in _subclasses(nn.Module):
            self._wrap(cls)
        recorder = self

        def init_subclass(cls: type[nn.Module], **kwargs: Any) -> None:  # classes your factory imports later
            super(nn.Module, cls).__init_subclass__(**kwargs)
            recorder._wrap(cls)

        nn.Module.__init_subclass__ = classmethod(init_subclass)  # type: ignore[method-assign,assignment]  # on purpose

    def _wrap(self, cls: type[nn.Module]) -> None:
        if not is_users(cls, self.roots):
            return
        original = cls.__init__

        @functools.wraps(original)
        def __init__(module: nn.Module, *args: Any, **kwargs: Any) -> None:
            key = id(module)
            self.depth[key] = self.depth.get(key, 0) + 1
            try:
                original(module, *args, **kwargs)
            finally:
                self.depth[key] -= 1
                outermost = self.depth[key] == 0
                if outermost:
                    del self.depth[key]
            if outermost:
                self.calls[module] = (args, kwargs)

        cls.__init__ = __init__  # type: ignore[method-assign,assignment]  # the recording wrapper, on purpose


class InputRecorder:
    """The first inputs each of the given modules is called with."""

    def __init__(self, modules: list[nn.Module]) -> None:
        self.calls: dict[int, Call] = {}
        self.handles: list[RemovableHandle] = [
            m.register_forward_pre_hook(self._record, with_kwargs=True) for m in modules
        ]

    def _record(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if id(module) not in self.calls:
            self.calls[id(module)] = (_detached(args), _detached(kwargs))

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _detached(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple | list):
        return type(value)(_detached(v) for v in value)
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    return value


def in_order(fn: Any, call: Call, what: str) -> list[tuple[str, Any]]:
    """The call's arguments as KernelBench passes them: positionally, in the signature's order, with
    the defaults of skipped parameters filled in."""
    signature = inspect.signature(fn)
    try:
        bound = signature.bind(*call[0], **call[1])
    except TypeError as exc:
        raise NotWritable(f"{what} was called in a way its signature does not take: {exc}") from None
    given = bound.arguments
    parameters = list(signature.parameters.values())
    last = max((i for i, p in enumerate(parameters) if p.name in given), default=-1)
    ordered: list[tuple[str, Any]] = []
    for index, parameter in enumerate(parameters[: last + 1]):
        if parameter.kind is parameter.VAR_POSITIONAL:
            ordered += [(f"{parameter.name}[{i}]", v) for i, v in enumerate(given.get(parameter.name, ()))]
        elif parameter.kind in (parameter.KEYWORD_ONLY, parameter.VAR_KEYWORD):
            if parameter.name in given and (parameter.kind is parameter.KEYWORD_ONLY or given[parameter.name]):
                raise NotWritable(f"{what} takes {parameter.name} by keyword only; KernelBench passes arguments "
                                  "in order")  # fmt: skip
        elif parameter.name in given:
            ordered.append((parameter.name, given[parameter.name]))
        elif index <= last:
            ordered.append((parameter.name, parameter.default))
    return ordered


def write(value: Any, roots: list[Path], needs: list[tuple[Path, str]]) -> str:
    """Python source for `value`; names from your code it uses are added to `needs` (to be bundled)."""
    if value is None or isinstance(value, bool | int | str | bytes):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, tuple | list):
        items = [write(v, roots, needs) for v in value]
        if isinstance(value, list):
            return f"[{', '.join(items)}]"
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{write(k, roots, needs)}: {write(v, roots, needs)}" for k, v in value.items()) + "}"
    if isinstance(value, torch.dtype):
        return f"torch.{str(value).removeprefix('torch.')}"
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f for f in dataclasses.fields(value) if f.init]
        arguments = ", ".join(f"{f.name}={write(getattr(value, f.name), roots, needs)}" for f in fields)
        return f"{_name(type(value), roots, needs)}({arguments})"
    if isinstance(value, type) or inspect.isfunction(value):
        return _name(value, roots, needs)
    if isinstance(value, nn.Module):
        raise NotWritable(f"a built module ({type(value).__name__}) cannot be written into a problem file")
    raise NotWritable(f"a {type(value).__name__} cannot be written into a problem file")


def _name(obj: Any, roots: list[Path], needs: list[tuple[Path, str]]) -> str:
    qualname = obj.__qualname__
    if "." in qualname:
        raise NotWritable(f"{qualname} is not defined at the top level of a module")
    path = source_file(obj)
    if path is not None and is_users(obj, roots):
        needs.append((path, qualname))
        return qualname
    if obj.__module__.split(".")[0] == "torch":
        return f"{obj.__module__}.{qualname}"
    raise NotWritable(f"{obj.__module__}.{qualname} is neither torch's nor from your code")


def spec_of(name: str, value: Any) -> InputSpec:
    """An input spec that draws values like the observed one: same dtype and shape; integers over the
    range seen, non-negative floats uniform up to the largest seen, other floats from randn."""
    if not isinstance(value, torch.Tensor):
        try:
            plain = ast.literal_eval(repr(value)) == value
        except (ValueError, SyntaxError):
            plain = False
        if not plain:
            raise NotWritable(f"input {name} is a {type(value).__name__}, not a tensor or a plain value")
        return ValueSpec(name, value)
    dtype = str(value.dtype).removeprefix("torch.")
    if dtype not in DTYPES.values():
        raise NotWritable(f"input {name} is a {dtype} tensor")
    shape = tuple(value.shape)
    if dtype == "bool" or value.numel() == 0:
        return TensorSpec(name, dtype, shape, default_distribution(dtype) or Distribution("randint", (0.0, 1.0)))
    low, high = value.min().item(), value.max().item()
    if not value.is_floating_point():
        return TensorSpec(name, dtype, shape, Distribution("randint", (float(low), float(high) + 1)))
    if low >= 0 and high > 0:
        return TensorSpec(name, dtype, shape, Distribution("uniform", (0.0, _round_up(high))))
    return TensorSpec(name, dtype, shape)


def _round_up(value: float) -> float:
    """Up to two significant digits: 0.973 -> 0.98, 1.04 -> 1.1."""
    step = 10 ** (math.floor(math.log10(value)) - 1)
    return round(math.ceil(value / step) * step, 12)
