"""Judging candidate kernels: compile, check and time them against the reference, in isolation."""

from kevin_tui.evaluator.build import EnvironmentProblem
from kevin_tui.evaluator.evaluator import EvalOptions, Evaluator
from kevin_tui.evaluator.verdict import Status, Verdict

__all__ = ["EnvironmentProblem", "EvalOptions", "Evaluator", "Status", "Verdict"]
