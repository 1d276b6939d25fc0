"""Red team 21: precision evidence, build flags and the remembered build failures (tests/candidates/redteam21/)."""

from __future__ import annotations

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, PROBLEMS

HERE = CANDIDATES / "redteam21"


@pytest.fixture(scope="module")
def float64_problem(build_cache):
    """One evaluator on tests/problems/relu_and_sums_float64.py, untimed."""
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(load_problem(PROBLEMS / "relu_and_sums_float64.py"), options, prespawn=False) as evaluator:
        yield evaluator


@pytest.mark.parametrize(
    ("name", "flagged"), [("float64_problem_in_float32", True), ("honest_float64_reordered", False)]
)
def test_a_float64_problem_computed_in_float32_is_lower_precision(float64_problem, name, flagged):
    """float64_problem_in_float32.py: float32's rounding (6e-8) sits inside float64's 1e-7, and the precision
    evidence skipped float64 outputs, so it was `correct` with no evidence and no warning. The float64 reference is
    that output's truth now; a float64 kernel summing in another order uses ~0 of the tolerance."""
    verdict = float64_problem.evaluate((HERE / f"{name}.py").read_text())
    assert verdict.status is Status.CORRECT, verdict.message
    precision = verdict.evidence.get("precision")
    assert precision is not None and precision["reference"] == 0
    assert ("lower_precision" in {w.code for w in verdict.warnings}) is flagged, precision
    assert (precision["candidate"] > 0.1) is flagged
