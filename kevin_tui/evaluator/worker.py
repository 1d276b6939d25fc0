"""Entry point of the worker processes: `python -m kevin_tui.evaluator.worker reference|candidate`.

The reference worker imports only the problem: it makes the inputs, the
reference outputs and the reference timings, and judges candidate outputs.
The candidate worker imports the (untrusted) candidate, builds it, runs it on
those inputs and times it. Events go to the parent as JSON lines on a private
copy of stdout; everything printed, by us, torch or the candidate, goes to the log.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

PLAIN_TYPES = (int, float, bool, str, type(None))


class Channel:
    def __init__(self) -> None:
        self.out: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)  # stray prints now land in the log, not in the protocol
        self.commands = sys.stdin

    def emit(self, event: str, **fields: Any) -> None:
        self.out.write(json.dumps({"event": event, **fields}, default=str) + "\n")
        self.out.flush()

    def next_command(self) -> dict[str, Any]:
        line = self.commands.readline()
        return json.loads(line) if line.strip() else {"cmd": "exit"}


def import_file(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seeded(seed: int, fn: Callable[[], Any]) -> Any:
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
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
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def resolve_device(requested: str) -> str:
    import torch

    from kevin_tui.evaluator.build import EnvironmentProblem

    if requested == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            why = "torch is a CPU-only build" if torch.version.cuda is None else "no CUDA device is visible"
            raise EnvironmentProblem(f"--device {requested} asked for, but {why}")
        device = requested if ":" in requested else "cuda:0"
        torch.cuda.set_device(device)
        return device
    return "cpu"


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


def watch_parent(parent: int, interval_s: float = 0.5) -> None:
    """If the process that started us dies (even by SIGKILL), take our whole group down with us:
    a half-finished build or a hanging kernel must not outlive the app that asked for it."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="kevin-parent-watch", daemon=True).start()


def main() -> None:
    role = sys.argv[1]
    watch_parent(os.getppid())
    channel = Channel()
    try:
        # Import torch before the request arrives, so a spare worker is ready when it does.
        if role == "reference":
            from kevin_tui.evaluator.reference_role import run_reference as run
        else:
            from kevin_tui.evaluator.candidate_role import run_candidate as run
        run(channel.next_command(), channel)
    except BaseException as exc:  # report, never die silently
        from kevin_tui.evaluator.build import EnvironmentProblem

        if isinstance(exc, EnvironmentProblem):
            channel.emit("environment_error", message=str(exc))
        else:
            channel.emit("crash", message=f"{type(exc).__name__}: {exc}", traceback=short_traceback(exc))
        raise SystemExit(1) from None


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


if __name__ == "__main__":
    main()
