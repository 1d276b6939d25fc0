"""Checks that need a CUDA device: run by scripts/gpu-check.sh on a GPU machine, skipped elsewhere."""

from __future__ import annotations

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from tests.conftest import candidate

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def relu_gpu(relu_problem, build_cache):
    options = EvalOptions(device="cuda", cache_dir=build_cache, build_timeout_s=600, profile=True, shapes="warn")
    with Evaluator(relu_problem, options) as evaluator:
        yield evaluator


def test_cuda_candidate_is_correct_and_timed_with_events(relu_gpu):
    verdict = relu_gpu.evaluate(candidate("relu_cuda.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert verdict.device.startswith("cuda")
    assert verdict.timings["candidate_events"].method.startswith("CUDA events")
    assert verdict.timings["candidate_events"].trials >= 100
    assert verdict.speedup and verdict.speedup_compile  # compile baseline is on by default on CUDA
    assert "hidden_stream_work" not in {w.code for w in verdict.warnings}


def test_work_hidden_on_a_side_stream_is_caught(relu_gpu):
    verdict = relu_gpu.evaluate(candidate("side_stream.py"))
    codes = {w.code for w in verdict.warnings}
    assert "creates_streams" in codes
    assert verdict.status is not Status.CORRECT or "hidden_stream_work" in codes, verdict.message


def test_uninitialised_memory_holding_the_reference_answer_fails(relu_gpu):
    verdict = relu_gpu.evaluate(candidate("empty_reuse.py"))
    assert verdict.status is Status.INCORRECT, verdict.message


def test_illegal_memory_access_is_a_runtime_error_and_the_next_candidate_runs(relu_gpu):
    verdict = relu_gpu.evaluate(candidate("illegal_access.py"))
    assert verdict.status is Status.RUNTIME_ERROR, verdict.message
    assert relu_gpu.evaluate(candidate("relu_torch.py")).status is Status.CORRECT


def test_cuda_tensor_subclass_and_mutation_still_caught(relu_gpu):
    assert relu_gpu.evaluate(candidate("mutate_input.py")).status is Status.INCORRECT
    assert relu_gpu.evaluate(candidate("tensor_subclass.py")).status is Status.INCORRECT


def test_the_sandbox_passes_the_gpu_through_and_every_mode_agrees(relu_problem, build_cache):
    for sandbox in ("bwrap", "unshare", "off"):
        options = EvalOptions(device="cuda", cache_dir=build_cache, sandbox=sandbox, timing_trials=50)
        with Evaluator(relu_problem, options) as evaluator:
            verdict = evaluator.evaluate(candidate("relu_cuda.py"))
        assert verdict.status is Status.CORRECT, f"{sandbox}: {verdict.message}"
        assert verdict.sandbox.startswith(sandbox)


def test_cuda_evidence_speed_of_light_coverage_and_an_interval(relu_gpu):
    verdict = relu_gpu.evaluate(candidate("relu_cuda.py"))
    sol = verdict.evidence["speed_of_light"]
    assert sol["peaks"]["source"] != "measured on this CPU (copy and matmul)"  # a known GPU from the table
    assert 0 < sol["candidate_fraction"] <= 1.25  # never clearly above the speed of light with L2 flushed
    assert verdict.evidence["coverage"] > 0.5  # the relu kernel is the candidate's own __global__
    assert any("relu" in name for name, _, _ in verdict.evidence["profile"]["kernels"])
    low, high = verdict.speedup_interval
    assert low <= verdict.speedup <= high
    assert verdict.clock.startswith("host clock")


def test_a_timed_call_faked_below_the_speed_of_light_is_rejected(relu_gpu):
    verdict = relu_gpu.evaluate(candidate("patched_timer.py"))
    assert verdict.status is Status.REJECTED, verdict.message


def test_nsight_compute_digest_or_the_reason_there_is_none(relu_problem, build_cache):
    """With ncu installed and permitted: the relu kernel's digest; otherwise a reason, never a failure."""
    from kevin_tui.evaluator.host.ncu import find_ncu

    options = EvalOptions(device="cuda", cache_dir=build_cache, build_timeout_s=600, profile=True, ncu="auto")
    with Evaluator(relu_problem, options) as evaluator:
        verdict = evaluator.evaluate(candidate("relu_cuda.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    found = verdict.evidence["ncu"]
    if find_ncu("auto") is None:
        assert "not found" in found["skipped"]
    elif "kernels" in found:
        relu = [k for k in found["kernels"] if "relu" in k["name"]]
        assert relu and relu[0]["memory_pct"] is not None and relu[0]["registers"]
    else:
        assert found["skipped"]
