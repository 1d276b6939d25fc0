"""Red team 29: red team 28's determinism allowances, its speed-of-light floor and the precision measured after the
last trial (tests/candidates/redteam29/)."""

from __future__ import annotations

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES
from tests.truths import exactly

HERE = CANDIDATES / "redteam29"


def _options(build_cache) -> EvalOptions:
    return EvalOptions(device="cpu", shapes="off", profile=False, timing=False, cache_dir=build_cache)


def test_a_kernel_narrow_only_in_each_trial_s_second_run_is_lower_precision(relu_problem, build_cache):
    """The secret trial's precision was measured on its "before" run only, and the candidate knows which run that is
    (the second run's inputs repeat the previous call's): a ReLU keeping 14 mantissa bits exactly then was `correct`
    with precision {0, 0} and no warning under --no-timing (accepted by --strict). The run that errs more is
    measured now."""
    with Evaluator(relu_problem, _options(build_cache), prespawn=False) as evaluator:
        verdict = evaluator.evaluate((HERE / "narrow_on_the_second_run.py").read_text())
    assert verdict.status is Status.CORRECT, verdict.message
    assert "lower_precision" in {w.code for w in verdict.warnings}, verdict.evidence.get("precision")


@pytest.mark.parametrize("problem", ["scale_in_place", "scaled_chunks"])
def test_the_output_floor_counts_what_the_reference_wrote(build_cache, problem):
    """written_bytes (red team 28) counted an output sharing memory with an input as nothing to write, and outputs
    sharing memory with each other as the largest of them: a scale done in place and returned (64 MB written) was
    counted 0 bytes, and 16 chunks of a 64 MB result 4 MB, so on an H200 a candidate timed at 1-5 us, where writing
    64 MB takes 14 us, was a warning, not "faster than any correct kernel can be" (here the host's finding is
    computed with the H200's figures, as on that device). An input the reference changed in place was written, and
    chunks count all they cover."""
    from kevin_tui.evaluator.host.speed_of_light import Bound, against_the_bound, gpu_peaks

    with Evaluator(load_problem(HERE / "problems" / f"{problem}.py"), _options(build_cache), prespawn=False) as ev:
        ready = ev.reference.ready()
    assert ready["output_bytes"] == 4096 * 4096 * 4  # written: all but a value x * 2 leaves as it was (a zero)
    assert ready["written_bytes"] > 0.99 * ready["output_bytes"], ready["written_bytes"]
    bound = Bound(ready["flops"], ready["work_bytes"], gpu_peaks("NVIDIA H200"))
    finding = against_the_bound(bound, ready["written_bytes"], "cuda:0", 0.005, 0.030)
    assert finding is not None and finding.rejected, finding


def test_written_bytes_of_views_sharing_one_tensor():
    """One tensor returned twice counts once, overlapping slices what they cover together, an expanded tensor its
    distinct values; a view of an input left unchanged counts nothing, an input changed in place the values that
    changed (an honest in-place kernel zeroing half its input writes only that half)."""
    import torch

    from kevin_tui.evaluator.worker.capture import written_bytes

    y = torch.randn(64, 64)
    assert written_bytes((y, y), [], []) == 64 * 64 * 4
    assert written_bytes(torch.chunk(y, 16, dim=1), [], []) == 64 * 64 * 4
    assert written_bytes((y[:32], y[16:48]), [], []) == 48 * 64 * 4
    column = torch.randn(64, 1)
    assert written_bytes((column.expand(64, 64), column.expand(64, 64)[:, :3]), [], []) == 64 * 4
    assert written_bytes(y.flatten(), [y], []) == 0
    assert written_bytes((y.flatten(), 1.5), [y], []) == 8  # a Python float is computed: one launch's floor on CUDA
    before = y.untyped_storage().clone()  # an input changed in place: the values the call changed there
    y[::2].zero_()
    assert written_bytes(y, [y], [], {y.untyped_storage().data_ptr(): before}) == 32 * 64 * 4
    assert written_bytes(y, [y], [], {y.untyped_storage().data_ptr(): y.untyped_storage().clone()}) == 0


def test_a_python_float_output_keeps_the_launch_floor():
    """A reference returning a Python float (`.item()` of a sum) counted 0 bytes written, which drops the one-launch
    floor on CUDA (red team 28 drops it where nothing need be written, a view of an input): a candidate at 1 us
    (under one kernel launch) was a warning on an H200. A float is computed in the call: it counts 8 bytes."""
    from kevin_tui.evaluator.host.speed_of_light import Bound, against_the_bound, gpu_peaks
    from kevin_tui.evaluator.worker.capture import written_bytes

    written = written_bytes(1.5, [], [])
    bound = Bound(4096 * 4096, 4096 * 4096 * 4, gpu_peaks("NVIDIA H200"))
    finding = against_the_bound(bound, written, "cuda:0", 0.001, 0.020)
    assert finding is not None and finding.rejected, finding


def test_runs_apart_by_more_than_the_allowances_still_disagree():
    """The determinism check's allowances (red team 28) tried as a race would use them, each run within the
    tolerance: bf16 runs 4 steps apart at 0.75 (the allowance there: half the tolerance and one step, 3.3 steps) and
    complex runs apart in the imaginary part by 0.8 of the tolerance are still "two runs on identical inputs
    disagree". Where the float32 reference's own error is large the allowance grows to it for every value of that
    tensor (test_redteam28.py), but every run must still pass the judge on its own: no run-to-run garbage outside
    the tolerance passes."""
    import torch

    from kevin_tui.evaluator.worker.judge import judge_trial
    from kevin_tui.evaluator.worker.tensorfile import Leaf

    def judged(ref: torch.Tensor, a: torch.Tensor, b: torch.Tensor, exact: torch.Tensor):
        both = {"before": Leaf(a, "cpu"), "after": Leaf(b, "cpu")}
        return judge_trial(ref, both, "cpu", None, None, "trial 1", precise=exactly(exact))

    ref = torch.full((64,), 0.75, dtype=torch.bfloat16)
    ref[0] = 1.5  # the tolerance's atol is 1e-2 (not cut by a tiny largest value)
    step = 2.0**-8  # bf16's step in [0.5, 1)
    low, high = ref.clone(), ref.clone()
    low[5], high[5] = 0.75 - 2 * step, 0.75 + 2 * step  # each within 1e-2 + 1e-2 * 0.75 of 0.75
    verdict = judged(ref, low, high, ref.double())
    assert not verdict.passed and "two runs on identical inputs disagree" in verdict.message, verdict.message
    near = ref.clone()
    near[5] = 0.75 + step  # one step: rounding float32 sums taken in another order
    assert judged(ref, ref, near, ref.double()).passed

    torch.manual_seed(0)
    exact = torch.randn(64, dtype=torch.complex128)
    ref32 = exact.to(torch.complex64)
    apart = ref32.clone()
    apart[3] += 0.8j * (1e-4 + 1e-4 * abs(float(ref32[3].imag)))
    verdict = judged(ref32, ref32, apart, exact)
    assert not verdict.passed and "two runs on identical inputs disagree" in verdict.message, verdict.message
