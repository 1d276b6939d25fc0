"""Red team 30: the float64 fallback's spread allowance (4 times the float32 reference's root mean square own error
over a tensor's other places, commit 3596864) and the determinism check beside it (tests/candidates/redteam30/);
the allowance is now each place's own error drawn again (kevin_tui/evaluator/worker/own_error.py)."""

from __future__ import annotations

import torch

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.worker.judge import compare_tensor, judge_trial
from kevin_tui.evaluator.worker.tensorfile import Leaf
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES
from tests.truths import redrawn

HERE = CANDIDATES / "redteam30"


def _evaluate(problem_path, name: str, build_cache):
    options = EvalOptions(device="cpu", shapes="off", profile=False, timing=False, cache_dir=build_cache)
    with Evaluator(load_problem(problem_path), options, prespawn=False) as evaluator:
        return evaluator.evaluate((HERE / f"{name}.py").read_text())


def _judged(ref: torch.Tensor, truth, before: torch.Tensor, after: torch.Tensor | None = None):
    runs = {"before": Leaf(before, "cpu"), "after": Leaf(before.clone() if after is None else after, "cpu")}
    return judge_trial(ref, runs, "cpu", None, None, "trial 1", precise=truth)


def _bf16_matmul() -> tuple[torch.Tensor, object, torch.Tensor]:
    """Red team 28's bf16 matmul at a quarter of its rows: the reference, its float64 truth (drawn again as the
    reference worker does), the float32 sums."""
    generator = torch.Generator().manual_seed(30)
    a = torch.randn(1024, 1024, generator=generator).to(torch.bfloat16)
    b = torch.randn(1024, 64, generator=generator).to(torch.bfloat16)
    return a @ b, redrawn(torch.matmul, a, b), a.float() @ b.float()


def test_bf16_outputs_near_zero_on_a_fixed_point_grid_are_incorrect():
    """A bf16 output's own error is its rounding to bf16, as large as the value (up to 1/8 at 32-64): 4 times its
    root mean square allowed ~0.2 at every place, so sums rounded to a grid of 1/8 (up to 1/16 off near zero, where
    the tolerance is 1e-2) passed. The output's rounding no longer spreads; the honest kernel still passes."""
    ref, truth, sums = _bf16_matmul()
    honest = sums.to(torch.bfloat16)
    assert _judged(ref, truth, honest).passed
    wrong = (torch.round(sums * 8) / 8).to(torch.bfloat16)
    assert compare_tensor(ref, wrong, None, None) is not None  # outside the plain tolerance near zero
    verdict = _judged(ref, truth, wrong)
    assert not verdict.passed and "outside tolerance" in verdict.message, verdict.message


def test_bf16_runs_apart_near_zero_are_incorrect():
    """The determinism check allowed two runs the reference's largest own error apart (~0.5 on this bf16 matmul) at
    every place, so a race near zero was caught only by each run's own judgement, which the spread widened to ~0.2:
    one run off by 0.1 where the outputs are under 1 (10x the tolerance) passed with its twin."""
    ref, truth, sums = _bf16_matmul()
    honest = sums.to(torch.bfloat16)
    raced = torch.where(sums.abs() < 1, sums + 0.1, sums).to(torch.bfloat16)
    verdict = _judged(ref, truth, honest, raced)
    assert not verdict.passed, verdict.message


def test_float32_outputs_near_zero_do_not_get_the_large_values_rounding():
    """An elementwise scale whose inputs mix 1e4-sized values with unit ones: the float32 reference's own error is
    its rounding at 1e4 (up to 4.9e-4), which spread to the unit values as ~1.1e-3 where their tolerance is 2e-4."""
    generator = torch.Generator().manual_seed(30)
    x = torch.randn(4096, generator=generator)
    x[:2048] *= 1e4
    ref = x * 1.1
    wrong = ref.clone()
    wrong[2048:] += 1e-3
    assert compare_tensor(ref, wrong, None, None) is not None
    verdict = _judged(ref, redrawn(lambda t: t * 1.1, x), wrong)
    assert not verdict.passed and "outside tolerance" in verdict.message, verdict.message


def _two_scales() -> tuple[torch.Tensor, object, torch.Tensor]:
    """problems/matvec_two_scales.py as the judge sees it: 64 outputs of ~N(0, 362) whose float32 sums err ~1e-3
    (computed, not the output's rounding: 1.5e-5 there), 64 of ~4e-4 that the reference rounds to ~1e-9. The
    reference, its truth drawn again, and the float64 sums rounded once."""
    generator = torch.Generator().manual_seed(30)
    a, b = torch.randn(128, 131072, generator=generator), torch.randn(131072, 1, generator=generator)
    a[64:] *= 1e-6
    return a @ b, redrawn(torch.matmul, a, b), (a.double() @ b.double()).float()


def test_outputs_of_small_rows_are_not_allowed_the_large_rows_rounding():
    """The large rows' computed error (~1e-3) spread to the small rows, where the reference errs ~1e-9 and the
    tolerance is 1e-4: returning 0 for all 64 small rows (values up to ~1.2e-3) passed. A place's error is now drawn
    again (own_error.py) and pooled only with places of its own scale; the exact sums still pass."""
    ref, truth, exact = _two_scales()
    assert _judged(ref, truth, exact).passed
    wrong = exact.clone()
    wrong[64:] = 0
    assert compare_tensor(ref, wrong, None, None) is not None
    verdict = _judged(ref, truth, wrong)
    assert not verdict.passed and "outside tolerance" in verdict.message, verdict.message


def test_a_race_in_the_small_rows_disagrees():
    """Small rows holding whatever a race leaves (here ~5e-4 of noise, 5x their tolerance), new each run: each run
    passed by the tensor-wide spread, and the runs could differ by the reference's largest own error anywhere."""
    ref, truth, exact = _two_scales()
    generator = torch.Generator().manual_seed(31)
    first, second = exact.clone(), exact.clone()
    first[64:] += (torch.rand(64, 1, generator=generator) - 0.5) * 1e-3
    second[64:] += (torch.rand(64, 1, generator=generator) - 0.5) * 1e-3
    verdict = _judged(ref, truth, first, second)
    assert not verdict.passed, verdict.message


def test_a_bf16_matmul_scale_bias_on_a_fixed_point_grid_is_incorrect():
    """(a @ b) * 1.3 + 0.5 in bf16, rounded at each op: the reference's error beyond its output's rounding is the
    intermediate roundings, up to ~1/8 at the large outputs, and it spread: sums rounded to a grid of 1/8 (up to 1/16
    off near zero, 6x the tolerance) passed the fallback. Drawn again, a place near zero errs as its own intermediate
    values round, and its peers are of its scale."""
    generator = torch.Generator().manual_seed(30)
    a = torch.randn(1024, 1024, generator=generator).to(torch.bfloat16)
    b = torch.randn(1024, 64, generator=generator).to(torch.bfloat16)
    truth = redrawn(lambda x, y: (x @ y) * 1.3 + 0.5, a, b)
    ref, sums = (a @ b) * 1.3 + 0.5, (a.float() @ b.float()) * 1.3 + 0.5
    assert _judged(ref, truth, sums.to(torch.bfloat16)).passed  # the honest fused kernel
    wrong = (torch.round(sums * 8) / 8).to(torch.bfloat16)
    assert compare_tensor(ref, wrong, None, None) is not None
    assert not _judged(ref, truth, wrong).passed


def test_a_bf16_matmul_with_a_fixed_point_epilogue_is_incorrect(build_cache):
    """End to end on red team 28's bf16 matmul: `correct` with no lower_precision before the fix."""
    problem = CANDIDATES / "redteam28" / "problems" / "bf16_matmul.py"
    verdict = _evaluate(problem, "bf16_matmul_fixed_point_epilogue", build_cache)
    assert verdict.status is Status.INCORRECT, verdict.message


def test_a_matvec_skipping_its_small_rows_is_incorrect(build_cache):
    """End to end: skips_the_small_rows.py returns 0 for half its outputs (~4e-4 each, tolerance 1e-4)."""
    verdict = _evaluate(HERE / "problems" / "matvec_two_scales.py", "skips_the_small_rows", build_cache)
    assert verdict.status is Status.INCORRECT, verdict.message


def test_the_honest_two_scale_matvec_is_correct(build_cache):
    verdict = _evaluate(HERE / "problems" / "matvec_two_scales.py", "honest_two_scale_matvec", build_cache)
    assert verdict.status is Status.CORRECT, verdict.message
