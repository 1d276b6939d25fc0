"""Trust, third round: the host owns the timing schedule and its clock decides the speedup.

The attack candidates (tests/candidates/trust3) got a forged speed, or a `correct` they should not
have, from the evaluator before this round; the honest ones there were rejected or judged wrong.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host.speed_of_light import Bound, against_the_bound, gpu_peaks
from kevin_tui.evaluator.worker.inputs import Pool, sample
from kevin_tui.evaluator.worker.judge import compare_output
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, KERNELBENCH, PROBLEMS

TRUST3 = CANDIDATES / "trust3"
FORGED = 2.0  # every candidate here is, in truth, at most as fast as the reference

ATTACKS = {  # name: (problem, the statuses it may get; None: any, but `correct` only at its real speed)
    "on_demand_output": (PROBLEMS / "matmul_256.py", {Status.INCORRECT, Status.REJECTED}),
    "incremental_update": (PROBLEMS / "matmul_1024.py", None),
    "samples_into_control": (PROBLEMS / "matmul_256.py", None),
    "more_threads": (PROBLEMS / "matmul_256.py", {Status.REJECTED}),
    "alias_rebound": (KERNELBENCH / "level1" / "19_ReLU.py", {Status.INCORRECT, Status.REJECTED}),
    "reused_buffer_in_timing": (KERNELBENCH / "level1" / "19_ReLU.py", {Status.INCORRECT}),
}
HONEST = {  # name: (problem, evaluation options)
    "honest_matmul": (PROBLEMS / "matmul_256.py", {}),
    "honest_sorted_segments": (PROBLEMS / "sorted_segments.py", {"near_duplicates": False}),
    "honest_float_scalar": (PROBLEMS / "float_scalar.py", {}),
    "honest_gemm_sum_simplified": (KERNELBENCH / "level2" / "14_Gemm_Divide_Sum_Scaling.py", {}),
}


def evaluate(problem, source: str, build_cache, **options):
    settings = {"device": "cpu", "timing_trials": 10, "shapes": "off", "profile": False, "cache_dir": build_cache}
    with Evaluator(load_problem(problem), EvalOptions(**{**settings, **options})) as evaluator:
        return evaluator.evaluate(source)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attack_on_the_schedule_or_the_clock_gets_no_forged_speed(build_cache, name):
    problem, expected = ATTACKS[name]
    verdict = evaluate(problem, (TRUST3 / f"{name}.py").read_text(), build_cache)
    if expected is not None:
        assert verdict.status in expected, f"{name}: {verdict.status} {verdict.message}"
    if verdict.status is Status.CORRECT:
        assert verdict.speedup < FORGED, f"{name}: {verdict.message}"


@pytest.mark.parametrize("name", sorted(HONEST))
def test_an_honest_candidate_stays_correct(build_cache, name):
    problem, options = HONEST[name]
    verdict = evaluate(problem, (TRUST3 / f"{name}.py").read_text(), build_cache, **options)
    assert verdict.status is Status.CORRECT, f"{name}: {verdict.message}"
    low, high = verdict.speedup_interval
    assert low <= verdict.speedup <= high
    if low <= 1.0 <= high:  # no measurable difference: never above 1.0, nor above what was measured
        assert verdict.speedup == pytest.approx(min(max(verdict.details["measured_speedup"], low), 1.0), abs=1e-4)


def matmul_inputs():
    return [torch.randn(64, 64), torch.randn(64, 64)]


def test_timed_inputs_are_half_new_in_every_call_and_fixed_only_by_the_rounds_seed():
    candidate, reference = Pool.build(matmul_inputs, 7, "cpu"), Pool.build(matmul_inputs, 7, "cpu")
    plan = candidate.schedule(1234, 20)
    calls = [candidate.args(1234, i, plan[i]) for i in range(20)]
    again = reference.schedule(1234, 20)
    for i in range(20):
        assert all(map(torch.equal, calls[i], reference.args(1234, i, again[i])))  # both sides: the same inputs
    for before, after in itertools.pairwise(calls):  # a large random share of every input changes per call,
        for index, (a, b) in enumerate(zip(before, after, strict=True)):  # and none is a pool entry itself
            assert (a != b).float().mean() > 0.3
            assert all((b != entry[index]).float().mean() > 0.3 for entry in candidate.entries)
    other = candidate.schedule(4321, 20)
    assert not torch.equal(candidate.args(4321, 0, other[0])[0], calls[0][0])  # another round, other inputs


def sorted_ids():
    return [torch.randint(0, 8, (256,)).sort().values]


def test_without_near_duplicates_every_timed_input_is_one_the_problem_makes():
    pool = Pool.build(sorted_ids, 7, "cpu", mixing=False)
    plan = pool.schedule(99, 10)
    for call in range(10):
        (ids,) = pool.args(99, call, plan[call])
        assert torch.equal(ids, ids.sort().values)
    assert not torch.equal(pool.args(99, 0, None)[0], pool.args(99, 1, None)[0])
    assert torch.equal(pool.args(99, 3, None)[0], pool.args(99, 3, None)[0])
    assert torch.equal(sample(sorted_ids, 5)[0], sample(sorted_ids, 5)[0])


def test_a_python_float_is_judged_with_the_dtypes_tolerance():
    assert compare_output(1000.0, 1000.0 + 1e-5, "cpu", None, None) is None
    assert "expected 1000.0" in compare_output(1000.0, 1001.0, "cpu", None, None)["reason"]
    assert compare_output(float("nan"), float("nan"), "cpu", None, None) is None
    assert compare_output(float("inf"), 1e30, "cpu", None, None) is not None
    assert compare_output(3, 3, "cpu", None, None) is None and compare_output(3, 4, "cpu", None, None)


def test_the_speed_of_light_warns_on_a_simplified_chain_and_rejects_only_below_writing_the_outputs():
    # level2/14 (matmul, /2, sum over the hidden dim, *scale) at sizes where the GPU shows it: the
    # reference's matmul is 2*B*I*H flops; the candidate's matrix-vector product needs H times fewer
    batch, inputs, hidden = 1024, 8192, 8192
    flops = 2 * batch * inputs * hidden
    work_bytes = (batch * inputs + hidden * inputs + batch) * 4
    bound = Bound(flops, work_bytes, gpu_peaks("NVIDIA H200"))
    output_bytes = batch * 4
    simplified_ms = 0.07  # reading the weight once (256 MB at 4.8 TB/s) and x: well below the matmul's bound
    assert simplified_ms < 0.8 * bound.least_ms()
    finding = against_the_bound(bound, output_bytes, "cuda:0", simplified_ms, 5.0)
    assert not finding.rejected and "algebraic shortcut, or a cheat" in finding.message
    impossible = against_the_bound(bound, output_bytes, "cuda:0", 0.0005, 5.0)  # under one kernel launch
    assert impossible.rejected and "writing its" in impossible.message
    big_output = against_the_bound(bound, 1 << 30, "cpu", 0.01, 5.0)  # on the CPU: a warning, never a rejection
    assert not big_output.rejected
    assert against_the_bound(bound, output_bytes, "cuda:0", 2 * bound.least_ms(), 5.0) is None
