"""Runtime tripwires inside the candidate worker.

A candidate runs in our process, so it could replace the functions that time
or check it. We record the identity of each such function before the
candidate is imported and compare after every step. We also look for work the
candidate leaves behind: Python threads and child processes still alive after
forward returns.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

WATCHED = (
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.monotonic",
    "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.synchronize", "torch.cuda.current_stream",
    "torch.allclose", "torch.isclose", "torch.equal", "torch.testing.assert_close",
    "torch.manual_seed", "torch.save", "torch.Tensor.clone", "torch.Tensor.cpu",
    "torch.Tensor.to", "torch.Tensor.detach", "torch.Tensor.__eq__", "torch.nn.Module.__call__",
    "torch.utils.cpp_extension.load_inline", "json.dumps", "os.write", "builtins.isinstance",
    "builtins.type",
)  # fmt: skip


def _resolve(dotted: str) -> Any:
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = obj.__dict__[attr] if isinstance(obj, type) and attr in obj.__dict__ else getattr(obj, attr)
        return obj
    raise ImportError(dotted)


class IdentityGuard:
    """Remembers watched functions; `replaced()` names any that are no longer the same object."""

    def __init__(self) -> None:
        self.snapshot = {name: _resolve(name) for name in WATCHED}

    def replaced(self) -> list[str]:
        changed = []
        for name, obj in self.snapshot.items():
            try:
                now = _resolve(name)
            except (ImportError, AttributeError, KeyError):
                changed.append(name)
                continue
            if now is not obj:
                changed.append(name)
        return changed


def child_pids() -> set[int]:
    pids: set[int] = set()
    for task in Path("/proc/self/task").glob("*/children"):
        try:
            pids.update(int(p) for p in task.read_text().split())
        except OSError:
            continue
    return pids


class LeftoverGuard:
    """Python threads and child processes that outlive a forward call."""

    def __init__(self) -> None:
        self.threads = set(threading.enumerate())
        self.children = child_pids()

    def leftovers(self) -> list[str]:
        found = [f"thread {t.name!r}" for t in threading.enumerate() if t not in self.threads and t.is_alive()]
        found += [f"child process {pid}" for pid in sorted(child_pids() - self.children)]
        return found


def visible_secrets() -> list[str]:
    """Names of credential-like environment variables the worker can see (should be none)."""
    from kevin_tui.evaluator.sandbox import is_secret_name

    return sorted(name for name in os.environ if is_secret_name(name))
