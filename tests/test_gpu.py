"""Checks that need a CUDA device: run by scripts/gpu-check.sh on a GPU machine, skipped elsewhere.

Each test's docstring says what it proves on a real GPU that nothing on the CPU can.
"""

from __future__ import annotations

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host import sanitizer
from kevin_tui.evaluator.host.ncu import find_ncu, profiling_admin_only
from tests.conftest import candidate, sandbox_here

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def relu_gpu(relu_problem, build_cache):
    options = EvalOptions(device="cuda", cache_dir=build_cache, build_timeout_s=600, profile=True, shapes="warn")
    with Evaluator(relu_problem, options) as evaluator:
        yield evaluator


def test_cuda_candidate_is_correct_and_timed_with_events(relu_gpu):
    """An honest nvcc-built kernel is judged correct on the GPU and timed with CUDA events, over at least
    100 calls, against eager and torch.compile, with no work hidden on another stream."""
    verdict = relu_gpu.evaluate(candidate("relu_cuda.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert verdict.device.startswith("cuda")
    assert verdict.timings["candidate_events"].method.startswith("CUDA events")
    assert verdict.timings["candidate_events"].trials >= 100
    assert verdict.speedup and verdict.speedup_compile  # compile baseline is on by default on CUDA
    assert "hidden_stream_work" not in {w.code for w in verdict.warnings}


def test_work_hidden_on_a_side_stream_is_caught(relu_gpu):
    """Work launched on a stream of the candidate's own, which CUDA events on the current stream would not
    wait for, is found (a warning at least, or a verdict that is not correct)."""
    verdict = relu_gpu.evaluate(candidate("side_stream.py"))
    codes = {w.code for w in verdict.warnings}
    assert "creates_streams" in codes
    assert verdict.status is not Status.CORRECT or "hidden_stream_work" in codes, verdict.message


def test_uninitialised_memory_holding_the_reference_answer_fails(relu_gpu):
    """torch.empty handing back the reference's freed output (the caching allocator reuses it) does not
    pass for a computed answer."""
    verdict = relu_gpu.evaluate(candidate("empty_reuse.py"))
    assert verdict.status is Status.INCORRECT, verdict.message


def test_illegal_memory_access_is_a_runtime_error_and_the_next_candidate_runs(relu_gpu):
    """A kernel that faults poisons only its own worker's CUDA context: runtime_error, and the next
    candidate is judged on a clean one."""
    verdict = relu_gpu.evaluate(candidate("illegal_access.py"))
    assert verdict.status is Status.RUNTIME_ERROR, verdict.message
    assert relu_gpu.evaluate(candidate("relu_torch.py")).status is Status.CORRECT


def test_cuda_tensor_subclass_and_mutation_still_caught(relu_gpu):
    """The input-mutation and tensor-subclass checks hold for CUDA tensors."""
    assert relu_gpu.evaluate(candidate("mutate_input.py")).status is Status.INCORRECT
    assert relu_gpu.evaluate(candidate("tensor_subclass.py")).status is Status.INCORRECT


def test_the_sandbox_passes_the_gpu_through_and_every_mode_agrees(relu_problem, build_cache):
    """The GPU's device nodes reach the worker in each sandbox this machine has (bwrap where installed,
    else the unshare fallback) and with none: the same kernel is correct in all of them."""
    for sandbox in dict.fromkeys(sandbox_here(kind) for kind in ("bwrap", "unshare", "off")):
        options = EvalOptions(device="cuda", cache_dir=build_cache, sandbox=sandbox, timing_trials=50)
        with Evaluator(relu_problem, options) as evaluator:
            verdict = evaluator.evaluate(candidate("relu_cuda.py"))
        assert verdict.status is Status.CORRECT, f"{sandbox}: {verdict.message}"
        assert verdict.sandbox.startswith(sandbox)


def test_cuda_evidence_speed_of_light_coverage_and_an_interval(relu_gpu):
    """On a known GPU the bound comes from its datasheet, an honest kernel with L2 flushed stays under it,
    its own __global__ holds most of the time, and the speedup comes with an interval around it."""
    verdict = relu_gpu.evaluate(candidate("relu_cuda.py"))
    sol = verdict.evidence["speed_of_light"]
    assert sol["peaks"]["source"] != "measured on this CPU (copy and matmul)"  # a known GPU from the table
    assert 0 < sol["candidate_fraction"] <= 1.25  # never clearly above the speed of light with L2 flushed
    assert verdict.evidence["coverage"] > 0.5  # the relu kernel is the candidate's own __global__
    assert any("relu" in name for name, _, _ in verdict.evidence["profile"]["kernels"])
    low, high = verdict.speedup_interval
    assert low <= verdict.speedup <= high
    assert verdict.clock.startswith("host clock")


def test_declared_peaks_that_the_reference_beats_too_give_a_warning_not_a_rejection_on_cuda(relu_problem, build_cache):
    """The CUDA floor end to end (the rejection itself, a candidate below it where the reference is not, is tested
    with the H200's figures in tests/test_trust_schedule.py and test_redteam28.py): declared peaks a thousand times
    below this GPU's put the honest kernel's real CUDA-event time under the time its outputs take to write, and the
    trusted reference's time too, so the floor does not hold for these figures: a warning that says both were below
    it, the verdict `correct` (before red team 28 it was `rejected` "faster than any correct kernel can be")."""
    import torch

    slow = {torch.cuda.get_device_name(0): {"bandwidth_gbs": 4.8, "fp32_tflops": 0.067, "tensor_tflops": 0.989}}
    options = EvalOptions(device="cuda", cache_dir=build_cache, peaks=slow, timing_trials=100)
    with Evaluator(relu_problem, options) as evaluator:
        verdict = evaluator.evaluate(candidate("relu_cuda.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    warnings = {w.code: w.message for w in verdict.warnings}
    assert "the reference was too" in warnings.get("below_speed_of_light", ""), warnings
    assert "configuration" in warnings["below_speed_of_light"]
    assert verdict.evidence["speed_of_light"]["candidate_fraction"] > 1


def test_a_timed_call_faked_by_a_patched_clock_is_rejected(relu_gpu):
    """A candidate that replaces time.perf_counter is rejected on CUDA as on the CPU (the tripwire)."""
    verdict = relu_gpu.evaluate(candidate("patched_timer.py"))
    assert verdict.status is Status.REJECTED, verdict.message


def test_nsight_compute_digest_or_the_reason_there_is_none(relu_problem, build_cache):
    """With ncu installed and the counters open to non-administrators: a digest of the relu kernel, and
    an empty one fails this test. Where the driver keeps the counters to administrators, the reason
    names that setting; where ncu is missing, the reason says so."""
    options = EvalOptions(device="cuda", cache_dir=build_cache, build_timeout_s=600, profile=True, ncu="auto")
    with Evaluator(relu_problem, options) as evaluator:
        verdict = evaluator.evaluate(candidate("relu_cuda.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    found = verdict.evidence["ncu"]
    if find_ncu("auto") is None:
        assert "not found" in found["skipped"]
    elif profiling_admin_only():
        assert "ERR_NVGPUCTRPERM" in found.get("skipped", "") and "RmProfilingAdminOnly" in found["skipped"], found
    else:
        relu = [k for k in found.get("kernels", []) if "relu" in k["name"]]
        assert relu, f"ncu is installed and permitted, but the digest is empty: {found}"
        assert relu[0]["duration_ns"] and relu[0]["memory_pct"] is not None and relu[0]["registers"]


PLANTED = [
    ("sanitizer/oob_read.py", "memcheck", "Invalid __global__ read", "relu_oob_kernel"),
    ("sanitizer/shared_race.py", "racecheck", "Race reported between", "relu_race_kernel"),
    ("sanitizer/uninit_read.py", "initcheck", "Uninitialized __global__ memory read", "relu_uninit_kernel"),
    ("sanitizer/divergent_barrier.py", "synccheck", "Barrier error detected", "relu_barrier_kernel"),
]


@pytest.fixture(scope="module")
def sanitized_gpu(relu_problem, build_cache):
    if sanitizer.find_sanitizer() is None:
        pytest.fail("compute-sanitizer is not installed on this GPU machine (the image is said to have it)")
    options = EvalOptions(device="cuda", cache_dir=build_cache, timing=False, sanitize="all")
    with Evaluator(relu_problem, options) as evaluator:
        yield evaluator


@pytest.mark.parametrize(("name", "tool", "what", "kernel"), PLANTED)
def test_the_sanitizer_gate_fails_a_planted_kernel_in_its_own_terms(sanitized_gpu, name, tool, what, kernel):
    """A kernel correct on every trial but with a memory, race or initialisation bug is `incorrect` under
    the gate, with the tool's first finding naming the kernel and, built with -lineinfo, its line."""
    verdict = sanitized_gpu.evaluate(candidate(name))
    assert verdict.details.get("unsanitized_status") == "correct", verdict.message
    assert verdict.status is Status.INCORRECT, verdict.message
    assert verdict.message.startswith(f"compute-sanitizer {tool}: {what}"), verdict.message
    assert f"in {kernel}(" in verdict.message and " at cuda.cu:" in verdict.message, verdict.message


def test_the_sanitizer_gate_passes_an_honest_kernel_under_every_tool(sanitized_gpu):
    """No false alarm from PyTorch's own kernels or the worker: the honest kernel stays correct under all
    four tools."""
    verdict = sanitized_gpu.evaluate(candidate("relu_cuda.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert list(verdict.evidence["sanitizer"]["tools"]) == list(sanitizer.TOOLS)
    assert sanitizer.summary(verdict.evidence["sanitizer"]).startswith("compute-sanitizer: clean under memcheck")
