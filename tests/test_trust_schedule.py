"""Trust, third round: the host owns the timing schedule and its clock decides the speedup.

The attack candidates (tests/candidates/trust3) got a forged speed, or a `correct` they should not
have, from the evaluator before this round; the honest ones there were rejected or judged wrong.
"""

from __future__ import annotations

import itertools
import types

import pytest
import torch

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host.speed_of_light import Bound, against_the_bound, gpu_peaks
from kevin_tui.evaluator.host.timing import Round, Side, clock_check, host_speedup
from kevin_tui.evaluator.worker.guards import IdentityGuard, RoundWatch
from kevin_tui.evaluator.worker.inputs import TimedInputs, call_seed, sample
from kevin_tui.evaluator.worker.judge import compare_output
from kevin_tui.evaluator.worker.timing_loop import Timer
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
    with Evaluator(load_problem(problem), EvalOptions(**{**settings, **options}), prespawn=False) as evaluator:
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


def structured_inputs():
    """Inputs with structure an honest kernel may rely on, beside plain and complex ones."""
    s = torch.randn(32, 32)
    h = torch.randn(8, 8, dtype=torch.complex64)
    return [torch.randn(64, 64), torch.randint(0, 8, (256,)).sort().values, s + s.T, torch.randn(32, 32).triu(),
            torch.randint(0, 64, (100,)), h + h.mH, torch.empty(0), 3]  # fmt: skip


def tensors_held(value: object, seen: set[int]) -> list[torch.Tensor]:
    """Every tensor reachable through the attributes and containers of `value` (what introspection finds); not
    through a module (the tripwires hold the ones they watch)."""
    if id(value) in seen or isinstance(value, types.ModuleType):
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    elif hasattr(value, "__dict__") and not callable(value):
        value = list(vars(value).values())
    return [t for v in value for t in tensors_held(v, seen)] if isinstance(value, list | tuple) else []


def shares_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    real = torch.view_as_real if a.is_complex() else lambda t: t
    return bool(torch.isin(real(a), real(b)).any())


def test_timed_inputs_are_fresh_samples_made_only_in_their_round(tmp_path):
    """Every timed call's input is a sample of the problem's own `get_inputs()` from the round's seed, the same
    on both sides; nothing the timer holds before a round shares a value with any of its inputs (a pool of
    entries mixed per call did: answers precomputed on them could be selected, redteam4)."""
    seen: list[list[torch.Tensor]] = []

    def record(args: list) -> torch.Tensor:
        seen.append([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        return args[0] + 1

    timer = Timer(record, TimedInputs(structured_inputs, "cpu"), "cpu", RoundWatch(IdentityGuard()))
    held = [t for t in tensors_held(timer, set()) if t.numel()]
    timer.round(6, 1234, tmp_path / "round.kt")
    other = TimedInputs(structured_inputs, "cpu")
    for call, args in enumerate(seen):
        expected = sample(structured_inputs, call_seed(1234, call))
        again = other.args(1234, call)
        for value, made, drawn in zip(args, expected, again, strict=True):  # exactly what the problem makes
            same = torch.equal if isinstance(value, torch.Tensor) else lambda a, b: a == b
            assert same(value, made) and same(value, drawn)
        ids, symmetric, hermitian = args[1], args[2], args[5]
        assert torch.equal(ids, ids.sort().values) and torch.equal(symmetric, symmetric.T)
        assert torch.equal(args[3], args[3].triu()) and torch.equal(hermitian, hermitian.mH)
        for value in args[:1] + args[2:4] + args[5:6]:  # the continuous ones: a shared value is no accident
            assert not any(shares_values(value, h) for h in held if h.dtype == value.dtype)
    for before, after in itertools.pairwise(seen):
        assert (before[0] != after[0]).float().mean() > 0.99
    assert not torch.equal(other.args(4321, 0)[0], seen[0][0])  # another round, other inputs


def test_work_done_on_spare_cores_beside_the_loop_is_charged():
    """`redteam4/draw_ahead_on_a_spare_core.py`: the next call's inputs drawn in a thread while this call
    computes, every call reported as 0 ms. Its rounds last only as long as the drawing, which is the
    reference's own loop overhead, so its kernel's time vanished from the host's figure. The CPU time its
    processes used over the threads it was given is charged instead; an honest round, using no more CPU than
    it lasts, is charged its wall-clock time."""
    kernel, draw, calls = 0.2, 1.6, 10
    reference = Side([Round([kernel] * calls, None, calls * (kernel + draw)) for _ in range(5)])
    ahead = [Round([0.0] * calls, None, calls * draw, cpu_s=calls * (kernel + draw) / 1e3) for _ in range(5)]
    assert host_speedup(reference, Side(ahead)) == pytest.approx(1.0)
    ahead_uncounted = [Round(r.samples_ms, None, r.window_ms) for r in ahead]
    assert host_speedup(reference, Side(ahead_uncounted)) > 100  # what the wall clock alone made of it
    honest = Round([kernel] * calls, None, calls * (kernel + draw), cpu_s=0.9 * calls * (kernel + draw) / 1e3)
    assert honest.charged_ms == honest.window_ms
    two_threads = Round([kernel] * calls, None, 10.0, cpu_s=0.03, threads=2)
    assert two_threads.charged_ms == pytest.approx(15.0)
    busy = [Round([10.0] * 3, None, 3 * (10.0 + draw), cpu_s=3 * (40.0 + draw) / 1e3) for _ in range(5)]
    assert clock_check(Side(busy), reference).problem() is None  # more cores than given: charged, not "forged"


def test_the_clock_check_allows_a_slower_process_loop_but_not_a_forged_call_time():
    """An honest 0.006 ms kernel on a machine at load 8 (`honest_float_scalar`, rejected twice in a row
    under the old allowance): its loop took 0.074 ms per call outside the calls against the reference's
    0.031 ms, and its process ran the reference's own model 1.16x slower. That is the processes differing,
    not a lie; a call reported as 0 ms while the host saw 1 ms per call is one."""
    reference = Side([Round([0.006] * 20, None, 20 * (0.006 + 0.031)) for _ in range(5)])
    controls = [Round([0.006] * 20, None, 1.16 * 20 * (0.006 + 0.031)) for _ in range(5)]
    honest = Side([Round([0.0063] * 20, None, 20 * (0.0063 + 0.074)) for _ in range(5)], controls)
    assert clock_check(honest, reference).problem() is None
    forged = Side([Round([0.0] * 20, None, 20 * (1.0 + 0.031)) for _ in range(5)], controls)
    assert "host's clock saw" in (clock_check(forged, reference).problem() or "")


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
