"""Red team 28: the determinism check, the speed-of-light floor, the timing schedule and the precision evidence
(tests/candidates/redteam28/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES
from tests.truths import exactly

HERE = CANDIDATES / "redteam28"


def _evaluate(problem: str | Path, name: str, build_cache, **options):
    """`problem`: a name under problems/, or a path."""
    settings = {"device": "cpu", "shapes": "off", "profile": False, "timing": False, "cache_dir": build_cache}
    settings.update(options)
    path = problem if isinstance(problem, Path) else HERE / "problems" / f"{problem}.py"
    with Evaluator(load_problem(path), EvalOptions(**settings), prespawn=False) as ev:
        return ev.evaluate((HERE / f"{name}.py").read_text())


@pytest.mark.parametrize("name", ["split_k_matvec_partials_in_any_order", "honest_split_k_matvec_fixed_order"])
def test_split_k_partials_in_another_order_each_call_are_correct(build_cache, name):
    """On a 131072-term reduction the float32 reference's own rounding is past the tolerance near zero; a split-K
    kernel adding its float partials in the order its blocks finish (float atomics) differs from itself by less than
    that rounding, but more than half the tolerance, and was `incorrect` for it ("uninitialised memory or a race?")."""
    level1_4_rows = CANDIDATES / "redteam" / "problems" / "matvec_few_rows.py"  # K = 131072, half of level1/4's rows
    verdict = _evaluate(level1_4_rows, name, build_cache)
    assert verdict.status is Status.CORRECT, verdict.message


def test_runs_apart_by_more_than_the_reference_s_own_error_still_disagree():
    """The agreement allowance grows by the float32 reference's own largest error only: runs further apart (a race,
    uninitialised memory) still fail, also where the reference erred past the tolerance."""
    import torch

    from kevin_tui.evaluator.worker.judge import judge_trial
    from kevin_tui.evaluator.worker.tensorfile import Leaf

    torch.manual_seed(0)
    exact = torch.randn(64, 1, dtype=torch.float64) * 300
    exact[5], exact[7] = 200.0, 0.0  # the tolerance there: 2e-2 (half of it 1e-2), and 1e-4 (5e-5)
    ref = (exact + torch.randn(64, 1, dtype=torch.float64) * 1e-3).float()  # its own error ~1e-3, past 1e-4
    ref[0], ref[7] = (exact[0] + 3e-3).float(), 2e-3  # its worst: 3e-3
    runs = exact.float()

    def judged(place: int, apart: float):
        other = runs.clone()
        other[place] += apart
        both = {"before": Leaf(runs, "cpu"), "after": Leaf(other, "cpu")}
        return judge_trial(ref, both, "cpu", None, None, "trial 1", precise=exactly(exact))

    assert judged(7, 1e-3).passed  # within the reference's own rounding (20x half the tolerance there)
    verdict = judged(5, 0.018)  # each run within the tolerance, apart by more than half of it plus 3e-3
    assert not verdict.passed and "two runs on identical inputs disagree" in verdict.message, verdict.message


def test_a_view_of_the_input_is_not_below_the_output_floor(build_cache):
    """The floor any correct kernel must take (its outputs written once, one launch; a rejection on CUDA) was
    counted from the reference output's full size, though the output is a view of the input: an honest flatten
    returning the same view, at the reference's own speed, was `rejected` on an H200 ("faster than any correct kernel
    can be"; here the host's finding is computed with the H200's figures, as on that device). An output made in
    the call still has its floor, and an expanded one counts each distinct value once."""
    import torch

    from kevin_tui.evaluator.host.speed_of_light import Bound, against_the_bound, gpu_peaks
    from kevin_tui.evaluator.worker.capture import written_bytes

    settings = EvalOptions(device="cpu", shapes="off", profile=False, timing=False, cache_dir=build_cache)
    problem = load_problem(HERE / "problems" / "flatten_view.py")
    with Evaluator(problem, settings, prespawn=False) as evaluator:
        verdict = evaluator.evaluate((HERE / "honest_flatten_returns_a_view.py").read_text())
        ready = evaluator.reference.ready()
    assert verdict.status is Status.CORRECT, verdict.message
    bound = Bound(ready["flops"], ready["work_bytes"], gpu_peaks("NVIDIA H200"))
    written = ready.get("written_bytes", ready["output_bytes"])  # what host/candidate_run.py passes
    view_ms = 0.0015  # a view returned on the GPU's host side, no kernel launched
    finding = against_the_bound(bound, written, "cuda:0", view_ms, view_ms)
    assert finding is None, finding  # nor "faster than the reference's work allows": the reference was as fast
    slower_reference = against_the_bound(bound, written, "cuda:0", view_ms, 1.0)
    assert slower_reference is not None and not slower_reference.rejected  # a warning where only the candidate beat it

    x = torch.randn(16, 64)
    assert written_bytes(x.flatten(), [x], []) == 0
    assert written_bytes(x + 1, [x], []) == x.numel() * 4
    assert written_bytes((x.sum(0).expand(16, 64), x.t()), [x], []) == 64 * 4
    y = x * 2
    assert written_bytes((y, y, y[0]), [x], []) == y.numel() * 4  # one tensor returned twice is written once
    reference_too = against_the_bound(bound, ready["output_bytes"], "cuda:0", view_ms, view_ms)
    assert reference_too is not None and not reference_too.rejected, reference_too  # the trusted reference beat it
    made = against_the_bound(bound, written_bytes(x.relu(), [x], []), "cuda:0", view_ms, 0.05)
    assert made is not None and made.rejected  # under one kernel launch: no correct kernel is that fast


def test_a_bf16_sum_rounded_once_after_float_atomics_is_correct(build_cache):
    """Runs of a split-K bf16 matmul whose float32 partials are added in another order each call round the odd value
    to the neighbouring bf16 value, one step apart: more than half bf16's tolerance just above a power of two. It was
    `incorrect` ("two runs on identical inputs disagree"); one step of a 16-bit output's format is allowed now (the
    reference's own error, which widens the allowance where the float64 result is at hand, also covered this one)."""
    verdict = _evaluate("bf16_matmul", "bf16_split_k_rounded_once", build_cache)
    assert verdict.status is Status.CORRECT, verdict.message


def test_one_step_of_a_16_bit_format_is_allowed_between_runs_two_are_not():
    import torch

    from kevin_tui.evaluator.worker.judge import disagreement
    from kevin_tui.evaluator.worker.tensorfile import Leaf

    ref = torch.tensor([32.0, 33.0, 1.0, 0.01], dtype=torch.bfloat16)
    near = ref.clone()
    near[0] = 32.25  # one bf16 step above 32: 0.25, against half the tolerance there, 0.16
    assert disagreement(ref, Leaf(ref.clone(), "cpu"), Leaf(near, "cpu"), None, None) is None
    far = ref.clone()
    far[1] = 33.5  # two steps
    assert disagreement(ref, Leaf(ref.clone(), "cpu"), Leaf(far, "cpu"), None, None) is not None


def test_complex_sums_in_another_order_each_call_are_correct(build_cache):
    """A complex output's two runs were compared exactly (only real floating-point outputs got half the tolerance),
    so complex row sums whose partials are added in another order each call (float atomics) were `incorrect`."""
    verdict = _evaluate("complex_row_sums", "complex_row_sums_in_any_order", build_cache)
    assert verdict.status is Status.CORRECT, verdict.message


CUMSUM_OPEN = (
    "torch's CPU cumsum accumulates in float64: an honest float32 scan errs past fp32's 1e-4 and the float64 "
    "fallback allows only the reference's own (nil) error (red team 28)"
)


@pytest.mark.xfail(strict=True, reason=CUMSUM_OPEN)
def test_an_honest_float32_scan_is_correct_and_not_lower_precision(build_cache):
    """torch's CPU cumsum accumulates float32 in float64, so an honest float32 running sum over 4000 terms is outside
    fp32's tolerance at the odd value (`incorrect` in about half the draws of a trial) and, where it passes, uses ~1400x
    the reference's share of the tolerance: `lower_precision` by size alone (a rejection under --strict)."""
    verdict = _evaluate("cumsum", "honest_float32_scan", build_cache)
    assert verdict.status is Status.CORRECT, verdict.message
    warnings = {w.code: w.message for w in verdict.warnings}
    assert "lower_precision" not in warnings, (warnings, verdict.evidence.get("precision"))


def test_the_timed_call_s_precision_is_measured_after_the_last_round(build_cache, monkeypatch):
    """The named timed call's float64 result was computed while its round was judged, with the candidate stopped:
    that judgement took a float64 forward longer, which the candidate reads off the clock between its own calls (a
    conv3d of 2x32x24^3 on the CPU, rounds of 3 calls: 291 ms from the measured round's last call to the next round's
    first, 52-164 ms after each of the other nine; the measured round fixed at 3 in the host's draw, one run). Having
    seen the one measured round pass, a kernel could be narrow, unmeasured, in every later round (in 4 of 10 draws,
    most of them: the median round). No round's judgement measures precision now; it is measured once, after the last
    round, and still reaches the verdict."""
    from kevin_tui.evaluator.host.reference import ReferenceWorker

    asked: list[tuple[str, Any]] = []
    original = ReferenceWorker.ask

    def recorded(self, command, expect):
        answer = original(self, command, expect)
        asked.append((command["cmd"], answer.get("precision")))
        return answer

    monkeypatch.setattr(ReferenceWorker, "ask", recorded)
    settings = EvalOptions(device="cpu", shapes="off", profile=False, timing=True, cache_dir=build_cache)
    problem = load_problem(CANDIDATES.parent / "problems" / "small_matmul.py")
    source = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
    with Evaluator(problem, settings, prespawn=False) as evaluator:
        verdict = evaluator.evaluate(source)
    assert verdict.status is Status.CORRECT, verdict.message
    commands = [command for command, _ in asked]
    assert "judge_timed" in commands and all(p is None for c, p in asked if c == "judge_timed"), asked
    last_round = max(i for i, c in enumerate(commands) if c == "judge_timed")
    assert "timed_precision" in commands[last_round:], commands
    assert next(p for c, p in asked if c == "timed_precision") is not None
    assert verdict.evidence.get("precision"), verdict.evidence


def test_the_secret_trial_s_precision_is_measured_after_the_last_trial(build_cache, monkeypatch):
    """As for the timed call: the secret trial's float64 forward, run as that trial was judged, made the gap before
    the candidate's next trial longer (by reading: the host sends the next trial once that judgement is done, and
    nothing else varies between trials), so a kernel could be narrow, unmeasured,
    in every trial after it: under --no-timing the only measurement. It is measured once every trial was judged."""
    from kevin_tui.evaluator.host.reference import ReferenceWorker

    asked: list[tuple[str, Any]] = []
    original = ReferenceWorker.ask

    def recorded(self, command, expect):
        answer = original(self, command, expect)
        named = "named trial" if command.get("precision") is True else command["cmd"]
        asked.append((named, answer.get("precision")))
        return answer

    monkeypatch.setattr(ReferenceWorker, "ask", recorded)
    settings = EvalOptions(device="cpu", shapes="off", profile=False, timing=False, cache_dir=build_cache)
    problem = load_problem(CANDIDATES.parent / "problems" / "small_matmul.py")
    source = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
    with Evaluator(problem, settings, prespawn=False) as evaluator:
        verdict = evaluator.evaluate(source)
    assert verdict.status is Status.CORRECT, verdict.message
    commands = [command for command, _ in asked]
    assert all(p is None for c, p in asked if c in ("judge", "named trial")), asked
    assert "trial_precision" in commands[commands.index("named trial") :], commands
    assert next(p for c, p in asked if c == "trial_precision") is not None
    assert verdict.evidence.get("precision"), verdict.evidence
