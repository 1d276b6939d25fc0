"""Judging candidate kernels: build, check and time them against the reference, in sandboxed workers.

`host/` is the caller's side (trusted: it decides every verdict); `worker/` is what runs inside the
sandboxed worker processes (checked, never believed); `protocol.py` is what may pass between them.
"""

from kevin_tui.evaluator.host.evaluator import Evaluator
from kevin_tui.evaluator.host.options import EvalOptions
from kevin_tui.evaluator.verdict import EnvironmentProblem, Status, Verdict

__all__ = ["EnvironmentProblem", "EvalOptions", "Evaluator", "Status", "Verdict"]
