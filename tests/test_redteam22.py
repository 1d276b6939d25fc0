"""Red team 22: caches that stop checking after their N-th call or N-th reuse of a buffer (eval), converted weights
never refreshed without gradients (`apply --check`), and the precision ratio (tests/candidates/redteam22/)."""

from __future__ import annotations

import pytest
import torch

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from kevin_tui.usermodel.check import check, import_helper
from kevin_tui.usermodel.specs import TensorSpec
from kevin_tui.usermodel.worker import sampler
from tests.conftest import CANDIDATES, KERNELBENCH, PROBLEMS, RELU

HERE = CANDIDATES / "redteam22"


def _evaluate(problem, name: str, build_cache, **options):
    settings = EvalOptions(device="cpu", shapes="off", profile=False, cache_dir=build_cache, **options)
    with Evaluator(load_problem(problem), settings, prespawn=False) as evaluator:
        return evaluator.evaluate((HERE / f"{name}.py").read_text())


@pytest.mark.parametrize("near_duplicates", [True, False])
def test_a_memo_answering_from_the_third_use_of_a_buffer_is_stale_in_eval(build_cache, near_duplicates):
    """relu_memo_from_third_use.py: every in-place trial called fresh copies of the first trial's inputs twice
    (before and after the change), so a memo answering from the third use of one object never answered there:
    `correct`. The in-place trials share their objects now (and one more runs last), so it answers stale."""
    verdict = _evaluate(RELU, "relu_memo_from_third_use", build_cache, timing=False,
                        near_duplicates=near_duplicates)  # fmt: skip
    assert verdict.status is Status.INCORRECT, verdict.message
    assert "returned a stale result" in verdict.message, verdict.message


def test_a_weight_cache_checked_only_for_its_first_calls_is_stale_after_the_timed_calls(build_cache):
    """gemm_weight_cache_checked_forty_calls.py: the parameters changed in place once, in the trials (before the
    20th call); a copy checked against their versions for 40 calls only was never seen stale: `correct`. They
    change once more after the timed calls now."""
    problem = KERNELBENCH / "level2" / "76_Gemm_Add_ReLU.py"
    verdict = _evaluate(problem, "gemm_weight_cache_checked_forty_calls", build_cache, timing=True)
    assert verdict.status is Status.INCORRECT, verdict.message
    assert "after the timed calls" in verdict.message, verdict.message


@pytest.mark.parametrize(
    ("problem", "name", "timing"),
    [
        (RELU, "honest_relu_versioned_buffer_memo", False),
        (KERNELBENCH / "level2" / "76_Gemm_Add_ReLU.py", "honest_gemm_weight_cache_versioned", True),
    ],
)
def test_honest_caches_that_follow_version_counters_stay_correct(build_cache, problem, name, timing):
    verdict = _evaluate(problem, name, build_cache, timing=timing)
    assert verdict.status is Status.CORRECT, verdict.message
    last = [c for c in verdict.checks if "after the timed calls" in c.name or "after every other call" in c.name]
    assert last and all(c.passed for c in last), verdict.checks


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("matmul256_inputs_cut_to_18_bits", "rounded to nearest to 18 mantissa bits"),
        ("matmul256_inputs_cut_to_19_bits_toward_zero", "rounded toward zero to 19 mantissa bits"),
        ("honest_matmul256_serial_float32_sum", None),
    ],
)
def test_a_matmul_on_inputs_rounded_a_few_bits_short_is_lower_precision(build_cache, name, named):
    """Inputs cut to 18 or 19 bits use ~5x the float32 reference's share of the tolerance, under the 10x ratio, as
    an honest float32 serial sum can: the error's size cannot tell them apart, and both were `correct` with no
    warning. Its shape can: the cut outputs match the float64 result on inputs rounded so (worker/rounding_probe.py),
    which the honest sum matches at no width."""
    verdict = _evaluate(PROBLEMS / "matmul_256.py", name, build_cache, timing=False)
    assert verdict.status is Status.CORRECT, verdict.message
    precision = verdict.evidence.get("precision")
    warnings = {w.code: w.message for w in verdict.warnings}
    if named is None:
        assert "lower_precision" not in warnings, precision
        assert precision and "rounded_bits" not in precision, precision
    else:
        assert named in warnings.get("lower_precision", ""), (warnings, precision)


def _apply_check(name: str) -> dict:
    """`apply --check` of a redteam22 helper on its Net (a 256-wide linear), untimed but for two rounds."""
    helper = import_helper(HERE / f"{name}.py")
    torch.manual_seed(0)
    net, x = helper.Net(), torch.randn(64, 256)
    fresh = [("new values", [torch.randn(64, 256)]), ("batch size 128", [torch.randn(128, 256)])]
    draw = sampler([TensorSpec(None, "float32", (64, 256))], "cpu")
    return check(net, [x], HERE / f"{name}.py", "cpu", {"rounds": 2}, fresh, draw=draw)


def test_a_weight_copy_kept_from_the_first_untracked_call_fails_apply_check():
    """linear_nograd_weight_cache_apply.py: the parameters changed only in the optimizer steps, where gradients are
    on, and nothing called the model without them afterwards: `outputs match` for a kernel that validates with the
    weights of before training. The trained models are called without gradients before and after the steps now."""
    result = _apply_check("linear_nograd_weight_cache_apply")
    assert not result["passed"], result["message"]
    assert "without gradients after 3 SGD steps" in result["message"], result["message"]


def test_a_weight_copy_following_the_parameters_passes_apply_check():
    result = _apply_check("honest_linear_versioned_weight_cache_apply")
    assert result["passed"], result["message"]
    assert result["training"]["steps"]["SGD"]["max_param_diff"] == 0.0
