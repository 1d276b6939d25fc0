"""Judging candidate kernels: build, check and time them against the reference, in sandboxed workers.

`host/` is the caller's side (trusted: it decides every verdict); `worker/` is what runs inside the
sandboxed worker processes (checked, never believed); `protocol.py` is what may pass between them.
The names below are imported on first use: every worker imports this package too, and loading the
host's side there cost each worker start 0.13 s (before the jail, in the unshare sandbox).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kevin_tui.evaluator.host.evaluator import Evaluator
    from kevin_tui.evaluator.host.options import EvalOptions
    from kevin_tui.evaluator.verdict import EnvironmentProblem, Status, Verdict

__all__ = ["EnvironmentProblem", "EvalOptions", "Evaluator", "Status", "Verdict"]
_HOMES = {"Evaluator": "host.evaluator", "EvalOptions": "host.options", "EnvironmentProblem": "verdict",
          "Status": "verdict", "Verdict": "verdict"}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
