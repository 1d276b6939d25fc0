"""Small helpers every worker role uses (all of them import torch lazily or run after it is imported)."""

from __future__ import annotations

import importlib.util
import inspect
import random
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from kevin_tui import devices

PLAIN_TYPES = (int, float, bool, str, type(None))
STARTED = time.monotonic()  # the worker's start: what its log's stamps count from


def log_stage(text: str) -> None:
    """A line in the worker's log (the app shows the builder's tail live), stamped with the seconds
    since the worker started."""
    print(f"[{time.monotonic() - STARTED:5.1f} s] {text}", file=sys.stderr, flush=True)


class EnvironmentProblem(Exception):
    """This machine cannot build or run the candidate (CPU-only torch, no nvcc): not the candidate's fault."""


def import_file(path: str | Path, name: str) -> ModuleType:
    """The Python file at `path` run as module `name`, registered in sys.modules (pickling and
    dataclasses look a class's module up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seeded(seed: int, fn: Callable[[], Any], every: bool = True) -> Any:
    """`fn()` with the generators it draws from seeded: the CPU's, and CUDA's, which a worker on a GPU has
    initialised first (`resolve_device`, `run_candidate`); with `every`, Python's `random` and numpy's global
    generator too, which a hand-written problem may draw from: two workers must draw the same inputs and build
    the same weights from one seed (a problem drawing with numpy got other inputs in each worker, and an honest
    kernel failed its first timing round: tests/candidates/redteam10/honest_relu_numpy_inputs.py). Timed calls
    seed those only for a problem that needs it (`TimedInputs`): ~25 us a call is loop work the candidate's copy
    could skip. Not `torch.manual_seed`: before CUDA is initialised it queues a lazy seed for each device type with
    a stack trace each (0.1-0.3 ms a call), work in every timed call's drawing that the candidate's copy of the
    loop can skip and spend on work the host then credits as the reference's loop overhead
    (tests/candidates/redteam8/lean_seeding_hides_the_kernel.py)."""
    import torch

    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)
    if every:
        random.seed(seed)
        if (numpy := sys.modules.get("numpy")) is not None:
            numpy.random.seed(seed % (1 << 32))
    return fn()


def to_device(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list | tuple):
        return type(value)(to_device(v, device) for v in value)
    return value


def clone(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list | tuple):
        return type(value)(clone(v) for v in value)
    return value


def same(a: Any, b: Any) -> bool:
    """Value for value the same, NaN alike (inputs hold NaN by design in some problems, and `torch.equal` calls
    a NaN changed): an input left unchanged, a problem's draw repeated, an output still holding what was
    copied when it was returned. A value that cannot be compared so (a dict of tensors) is not called changed."""
    import torch

    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        if torch.equal(a, b):
            return True
        if a.is_complex():  # each part NaN alike on its own
            return same(torch.view_as_real(a.resolve_conj()), torch.view_as_real(b.resolve_conj()))
        return a.is_floating_point() and bool(((a == b) | (a.isnan() & b.isnan())).all())
    if type(a) in (list, tuple):
        return type(b) is type(a) and len(a) == len(b) and all(map(same, a, b))
    try:
        return bool(a == b) or (a != a and b != b)  # a float NaN is alike
    except Exception:
        return True


def same_values(live: Any, copy: Any) -> bool:
    """A returned output still holds the values copied when it was returned; what the copy could not hold
    (not a plain tensor, tuple or list) is judged elsewhere."""
    import torch

    if type(live) is torch.Tensor and type(copy) is torch.Tensor:
        return same(live, copy)
    if type(live) in (tuple, list) and type(copy) is type(live) and len(live) == len(copy):
        return all(map(same_values, live, copy))
    return True


def resolve_device(requested: str) -> str:
    """--device as kevin_tui.devices reads it, with torch as the judge of whether there is a GPU; a GPU
    asked for and missing is an EnvironmentProblem that says why."""
    import torch

    device = devices.resolve_device(requested, torch.cuda.is_available)
    if not device.startswith("cuda"):
        return "cpu"
    if not torch.cuda.is_available():
        why = "torch is a CPU-only build" if torch.version.cuda is None else "no CUDA device is visible"
        raise EnvironmentProblem(f"--device {requested} asked for, but {why}")
    torch.cuda.set_device(device)
    torch.cuda.init()  # before anything is seeded: `seeded` seeds CUDA's generators only once it is initialised
    return device


def graph_breaks(explanation: Any) -> int:
    """The graph breaks in torch._dynamo.explain's account: a break in a frame that leaves no graph (a
    forward that is one extension call) is in its break reasons but not in its graph_break_count."""
    return max(explanation.graph_break_count, len(explanation.break_reasons))


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def short_traceback(exc: BaseException, limit_chars: int = 3000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text[-limit_chars:]


def environment(device: str) -> dict[str, Any]:
    import torch

    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": device}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def signature_problem(cls: type, method: str, args: list[Any]) -> str | None:
    """Why `cls.method` cannot take the reference's arguments, or None."""
    target = cls if method == "__init__" else getattr(cls, method, None)
    if target is None:
        return f"ModelNew has no {method}()"
    try:
        signature = inspect.signature(target)
        if method != "__init__":
            params = list(signature.parameters.values())[1:]
            signature = signature.replace(parameters=params)
        signature.bind(*args)
    except TypeError as exc:
        return f"ModelNew.{method} cannot take the reference's {len(args)} argument(s): {exc}"
    except ValueError:
        return None  # builtins without a signature: let the call decide
    return None
