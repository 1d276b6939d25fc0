"""Attacks a twelfth red team wrote against the timing side: the processes' allocators and what the control round
measures (tests/candidates/redteam12/, each file's docstring says the attack, its true verdict and what it got
before the fix)."""

from __future__ import annotations

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.evaluator.host.candidate_run import speed_figures
from kevin_tui.evaluator.host.timing import Round, Side, process_gap_ms
from kevin_tui.evaluator.verdict import Status
from kevin_tui.problem import ProblemError, load_problem
from tests.conftest import CANDIDATES, candidate


@pytest.fixture(scope="module")
def untimed(relu_problem, build_cache):
    """An evaluator on ReLU without timing (not strict: a probe may raise), one per test module."""
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


# -- every worker's allocator keeps freed memory: no process gets fault-free allocations the other lacks ----------


def test_a_freed_large_tensor_is_reused_without_page_faults_in_the_candidates_worker(untimed):
    """allocator_tuned_relu.py: one `mallopt` in the candidate's library (never mmap, never trim) made its process's
    allocations fault-free while the reference worker's 32 MB inputs and outputs were faulted in page by page:
    its plain C++ ReLU read `correct` 6.8x [1.53-11.39] on problems/relu_32mb.py, its honest twin 0.65x. Every
    worker now starts so: four 64 MB tensors made and freed in turn cost no page faults once the heap has settled
    (65,536 before: each one faulted in afresh)."""
    verdict = untimed.evaluate(candidate("redteam12/probe_page_faults.py"))
    assert verdict.status is Status.RUNTIME_ERROR, verdict.message
    assert faults_in(verdict.message) < 16384, verdict.message


def test_the_reference_worker_allocates_as_the_candidates_does(build_cache):
    """The same setting in the reference worker (worker/main.py sets it for every role): a problem that reports the
    page faults of four 64 MB tensors as the reason it cannot run."""
    problem = load_problem(CANDIDATES / "redteam12" / "problems" / "probe_reference_faults.py")
    options = EvalOptions(device="cpu", cache_dir=build_cache)
    with pytest.raises(ProblemError) as raised, Evaluator(problem, options, prespawn=False) as evaluator:
        evaluator.evaluate(candidate("relu_torch.py"))
    assert faults_in(str(raised.value)) < 16384, raised.value


def faults_in(message: str) -> int:
    return int(message.rsplit("page faults: ", 1)[1].split()[0])


# -- a process that runs the shared loop faster: its control's gain is time, not only a ratio --------------------


def sides(reference_ms: float, overhead_ms: float, candidate_ms: float, control_ms: float) -> dict[str, Side]:
    """Ten rounds of three calls each: the reference (its calls and its loop), the candidate's rounds (which report
    almost nothing of their window) and its controls (the reference's model in its process), per call, host clock;
    a little round-to-round noise so that the bootstrap has something to resample."""
    eager, candidate = Side(), Side()
    for r in range(10):
        wobble = 1 + 0.01 * (r % 3 - 1)
        eager.rounds.append(Round([reference_ms * wobble] * 3, None, 3 * (reference_ms + overhead_ms) * wobble))
        candidate.rounds.append(Round([0.01] * 3, None, 3 * (candidate_ms + overhead_ms) * wobble))
        candidate.controls.append(Round([0.01] * 3, None, 3 * control_ms * wobble))
    return {"eager": eager, "candidate": candidate}


def test_a_control_faster_than_the_reference_by_time_widens_the_interval_by_that_time():
    """allocator_tuned_relu.py's figures before the allocator fix (relu_32mb, host clock per call): reference 41.1
    ms plus 61.4 ms of loop, the candidate's rounds 6.0 ms beyond that loop, and its controls 0.30x the reference's
    own rounds (30.7 ms a call: the allocator tuning sped its process's loop up). Widened by that ratio only, the
    interval's low end stayed far above 1 and the headline read the 6.8x; the control's gain as time (71.8 ms a
    call, added to the candidate's time) takes it to 1.0."""
    verdict = speed_figures(sides(41.1, 61.4, 6.03, 30.7), "cpu", seed=1)
    low, high = verdict.speedup_interval or (0.0, 0.0)
    assert verdict.details["measured_speedup"] > 6, verdict.details
    assert low <= 1.0 <= high and verdict.speedup == 1.0, (verdict.speedup, verdict.speedup_interval)


def test_a_control_as_fast_as_the_reference_leaves_an_honest_speedup_as_it_was():
    """The honest twin: a kernel twice as fast as the reference in a process that runs the reference's model as the
    reference's worker does keeps its 2x and an interval that excludes 1; a slower control only widens the top."""
    for control_ms in (41.1 + 61.4, 1.2 * (41.1 + 61.4)):
        verdict = speed_figures(sides(41.1, 61.4, 41.1 / 2, control_ms), "cpu", seed=1)
        low, _ = verdict.speedup_interval or (0.0, 0.0)
        assert low > 1.5 and verdict.speedup == pytest.approx(2.0, rel=0.05), (control_ms, verdict.speedup_interval)
    slower = sides(41.1, 61.4, 6.0, 1.2 * 102.5)
    assert process_gap_ms(slower["eager"], slower["candidate"]) == 0.0
