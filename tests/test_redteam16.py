"""Red team 16: timing, the judge, false rejects and the user's-model check (tests/candidates/redteam16/)."""

from __future__ import annotations

import copy
import importlib.util

import torch

from kevin_tui.usermodel.check import compare_norm
from tests.conftest import CANDIDATES

HERE = CANDIDATES / "redteam16"


def _candidate(name: str):
    spec = importlib.util.spec_from_file_location(f"redteam16_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_bf16_gradient_with_its_tail_tile_left_at_zero_does_not_match_by_its_norm():
    torch.manual_seed(0)
    gradient = torch.randn(1024, 1024).bfloat16()
    dropped = gradient.clone()
    dropped[-8:, -8:] = 0
    why, difference = compare_norm(gradient, dropped, None, None, "the gradient of parameter proj.weight")
    assert why is not None and "more than 10x rtol of the largest" in why, why
    assert difference > 2


def test_the_tail_dropping_backward_candidates_weight_gradient_fails_and_the_right_one_matches():
    module = _candidate("bf16_backward_tail_tile_dropped")
    torch.manual_seed(1)
    model = module.ModelNew(1024)
    x = torch.randn(4, 64, 1024, dtype=torch.bfloat16)
    model(x).float().square().sum().backward()
    got = model.proj.weight.grad.clone()
    model.zero_grad()
    torch.nn.functional.linear(x, model.proj.weight, model.proj.bias).float().square().sum().backward()
    expected = model.proj.weight.grad
    assert compare_norm(expected, got, None, None, "grad")[0] is not None
    assert compare_norm(expected, expected.clone(), None, None, "grad")[0] is None


def test_honest_bf16_rounding_differences_still_match_by_the_norm():
    """The norm is there for a bf16 tensor computed in another order: a split-K matmul whose two partials are
    rounded to bf16 misses the elementwise tolerance on 11,242 of 262,144 values (up to 1.0 off, where values
    near zero cancel) and still matches, as it did before the elementwise cap."""
    torch.manual_seed(2)
    a, b = torch.randn(512, 1024).bfloat16(), torch.randn(1024, 512).bfloat16()
    expected = (a.float() @ b.float()).bfloat16()
    split_k = (a[:, :512] @ b[:512]) + (a[:, 512:] @ b[512:])
    why, difference = compare_norm(expected, split_k, None, None, "output")
    assert why is None and difference >= 0.5


def test_an_infinite_reference_value_is_matched_only_by_the_same_infinity():
    from kevin_tui.usermodel.check import compare

    module = _candidate("masked_scores_fill_finite")
    torch.manual_seed(3)
    scores, mask = torch.randn(4, 16, 16), torch.rand(4, 16, 16) > 0.7
    expected = scores.masked_fill(mask, float("-inf"))
    why, difference = compare(expected, module.ModelNew()(scores, mask), None, None)
    assert why is not None and difference == float("inf"), why
    inf = float("inf")
    for reference, got in [([-inf, 1.0], [inf, 1.0]), ([inf, 1.0], [3e38, 1.0]), ([1.0, 1.0], [inf, 1.0])]:
        assert compare(torch.tensor(reference), torch.tensor(got), None, None)[0] is not None, (reference, got)
    assert compare_norm(expected, expected.masked_fill(mask, 0.0), None, None, "gradient")[0] is not None


def test_the_same_infinities_and_nans_with_close_numbers_still_match():
    from kevin_tui.usermodel.check import compare

    torch.manual_seed(4)
    scores, mask = torch.randn(4, 16, 16), torch.rand(4, 16, 16) > 0.7
    expected = scores.masked_fill(mask, float("-inf"))
    got = (scores * (1 + 1e-6)).masked_fill(mask, float("-inf"))
    why, difference = compare(expected, got, None, None)
    assert why is None and 0 < difference < 1e-4
    nan = float("nan")
    assert compare(torch.tensor([nan, 2.0]), torch.tensor([nan, 2.0]), None, None) == (None, 0.0)
    assert compare(torch.tensor([nan, 2.0]), torch.tensor([0.0, 2.0]), None, None)[0] is not None


def test_apply_checks_timing_gives_a_memo_keyed_on_the_inputs_identity_no_free_calls():
    from kevin_tui.usermodel.check import inference, timed
    from kevin_tui.usermodel.specs import TensorSpec
    from kevin_tui.usermodel.worker import sampler

    module = _candidate("memo_by_identity_apply_speedup")
    torch.manual_seed(5)
    memo = module.ModelNew(256)
    plain = copy.deepcopy(memo.proj)
    x = torch.randn(128, 256)
    figures = timed(
        inference(plain), inference(memo), "cpu", 8, sampler([TensorSpec(None, "float32", (128, 256))], "cpu")
    )
    assert figures["speedup"] < 4, figures  # ~1.0 (the same linear); 100x and more with every call a hit
    assert torch.equal(inference(memo)([x]), plain(x))


def _speed(speedup: float, low: float, high: float):
    from kevin_tui.evaluator.host.decisions import Finding, decide

    verdict = decide(Finding.CORRECT, f"correct, {speedup}x")
    verdict.speedup, verdict.speedup_interval, verdict.candidate_ms, verdict.reference_ms = speedup, [low, high], 1, 2
    verdict.details["measured_speedup"] = speedup
    return verdict


def test_a_measurement_taken_again_after_the_clock_check_failed_can_only_lower_the_speedup(monkeypatch):
    from kevin_tui.evaluator.host.candidate_run import HostRun, speed_record
    from kevin_tui.evaluator.host.decisions import Finding, decide
    from kevin_tui.evaluator.verdict import Status

    unlucky = {"clock_check": {"n": 1}, "speed_if_agreed": speed_record(_speed(1.0, 0.6, 1.3))}
    outcomes = [decide(Finding.CLOCK_DISAGREES, "the control ran 9x faster", evidence=unlucky), _speed(1.8, 1.2, 2.4)]
    monkeypatch.setattr(HostRun, "measure", lambda self: outcomes.pop(0))
    verdict = HostRun.time(object.__new__(HostRun))
    assert verdict.status is Status.CORRECT and verdict.speedup == 1.0 and verdict.speedup_interval == [0.6, 1.3]
    assert verdict.evidence["remeasured"]["speedup"] == 1.8 and verdict.evidence["clock_check_first_attempt"]
    assert "the lower of two measurements" in verdict.message


def test_an_honest_retry_that_reads_slower_the_second_time_keeps_its_second_figures(monkeypatch):
    from kevin_tui.evaluator.host.candidate_run import HostRun, speed_record
    from kevin_tui.evaluator.host.decisions import Finding, decide

    missed = {"clock_check": {"n": 1}, "speed_if_agreed": speed_record(_speed(2.1, 1.6, 2.6))}
    outcomes = [decide(Finding.CLOCK_DISAGREES, "bookkeeping on a loaded machine", evidence=missed),
                _speed(1.9, 1.5, 2.3)]  # fmt: skip
    monkeypatch.setattr(HostRun, "measure", lambda self: outcomes.pop(0))
    verdict = HostRun.time(object.__new__(HostRun))
    assert verdict.speedup == 1.9 and verdict.speedup_interval == [1.5, 2.3] and "remeasured" not in verdict.evidence
