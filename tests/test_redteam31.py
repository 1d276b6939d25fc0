"""Red team 31: the timing path's schedule and floor (tests/candidates/redteam31/)."""

from __future__ import annotations

from pathlib import Path

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host.timing import Round, Side, TimingPlan, headline, host_speedup, speedup_interval
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES

HERE = CANDIDATES / "redteam31"


def _evaluate(problem: str | Path, name: str, build_cache, **options):
    """`problem`: a name under problems/, or a path."""
    settings = {"device": "cpu", "shapes": "off", "profile": False, "timing": True, "cache_dir": build_cache}
    settings.update(options)
    path = problem if isinstance(problem, Path) else HERE / "problems" / f"{problem}.py"
    with Evaluator(load_problem(path), EvalOptions(**settings), prespawn=False) as ev:
        return ev.evaluate((HERE / f"{name}.py").read_text())


def test_skipped_tripwires_and_a_zero_report_are_no_speedup(build_cache):
    """An identical ReLU (torch.relu) that slowed its warm-up to get three calls a round, skipped its tripwires in
    its main rounds (Timer.round's code replaced in place, its identity kept) and reported 0 ms for every call was
    `correct` at 13,885,833x (95% interval 13,332,999-27,059,740x): the host subtracts the reference's loop overhead,
    tripwires included, and what was left of the candidate's rounds was below zero, its own report the floor. The
    floor is now the reference's own time in its tripwires per call, and the schedule its main rounds bear out."""
    verdict = _evaluate("small_relu", "warmup_sets_few_calls", build_cache)
    assert verdict.status is Status.CORRECT, verdict.message
    # what it still skips (the aliases check of a round's first call, RoundWatch in the few rounds that run it) is a
    # few microseconds a call: bounded by the floor, against the load's noise on a short kernel (3x seen at load 6)
    assert verdict.details["measured_speedup"] < 100.0, verdict.message
    assert verdict.speedup is not None and verdict.speedup < 10.0, verdict.message
    assert verdict.evidence["schedule_remeasured"]["calls_first"] == 3, verdict.evidence.get("schedule_remeasured")


def test_a_slow_kernel_s_slow_warm_up_does_not_lift_it_to_the_floor(build_cache):
    """A ReLU eight times over (0.14-0.26x here) whose warm-up alone is slow: at the three calls a round it set, the
    tripwire floor, while RoundWatch ran at every round's end (a third of its ~0.3 ms in each call), lifted the
    reference's time to ~0.1 ms and the kernel read 0.75x. Its main rounds do not bear its warm-up out: it is measured
    again at the calls they imply, and reads as slow as it is."""
    verdict = _evaluate("small_relu", "slow_kernel_slow_warmup", build_cache)
    assert verdict.status is Status.CORRECT, verdict.message
    assert verdict.details["measured_speedup"] < 0.5, verdict.message
    assert "schedule_remeasured" in verdict.evidence, verdict.evidence.keys()


def _side(per_call: float, outside: float, calls: int, tripwires: float | None, reported: float | None = None) -> Side:
    told = per_call if reported is None else reported
    return Side(
        [
            Round(
                [told] * calls,
                None,
                calls * (per_call + outside),
                **({} if tripwires is None else {"tripwires_ms": tripwires}),
            )
            for _ in range(10)
        ]
    )


def test_the_floor_is_the_reference_s_tripwire_time():
    """By the figures of the run above: the reference's call 0.013 ms, its loop 0.25 ms outside the calls of which
    0.013 ms a call are its tripwires; the candidate skipped them (its whole call and loop 0.25 ms) and reported 0.
    Without the reference's tripwire time (an older reference worker, a hand-made round) the speedup is what it was."""
    from kevin_tui.evaluator.host.timing import tripwire_floor

    calls = 64
    reference = _side(0.013, 0.25, calls, tripwires=0.013 * calls)
    skipped = _side(0.0, 0.25, calls, None, reported=0.0)
    assert abs(tripwire_floor(reference) - 0.013) < 1e-9
    point = host_speedup(reference, skipped)
    low, high = speedup_interval(reference, skipped)
    assert point < 1.0 + 1e-9 and headline(point, (low, high)) < 1.0 + 1e-9, (point, low, high)
    unreported = _side(0.013, 0.25, calls, tripwires=None)
    assert tripwire_floor(unreported) == 0.0
    assert host_speedup(unreported, skipped) > 1e6


def test_a_warm_up_the_main_rounds_bear_out_sets_the_schedule():
    """Only a candidate whose main rounds ran more than twice the calls' worth its warm-up claimed is measured
    again: an honest warm-up a little slower than its rounds is not."""
    from kevin_tui.evaluator.host.timing import misled_schedule

    plan = TimingPlan.for_device("cpu")
    fast = _side(0.013, 0.25, 3, None)  # 0.263 ms a call on the host's clock
    assert misled_schedule(plan, "cpu", 1 << 18, 3, 1.3, fast) == plan.calls_per_round("cpu", 1.3, 1 << 18)
    assert misled_schedule(plan, "cpu", 1 << 18, 22, 1.3, fast) is None
    slow = _side(10.0, 0.25, 3, None)
    assert misled_schedule(plan, "cpu", 1 << 18, 3, 1.3, slow) is None
