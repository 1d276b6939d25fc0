"""Attacks a red team of our own wrote against the evaluator after the third trust round
(tests/candidates/redteam/, each file's docstring says the attack and the verdict it got before the fix).
Those still open are in the README's "not prevented" list and are not asserted here."""

from __future__ import annotations

import contextlib

import pytest
import torch

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.worker.judge import compare_tensor
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, PROBLEMS
from tests.conftest import candidate as candidate_source
from tests.truths import redrawn

REDTEAM = CANDIDATES / "redteam"


def redteam(name: str) -> str:
    return (REDTEAM / f"{name}.py").read_text()


def test_a_complex_output_is_judged_on_both_parts():
    ref = torch.randn(64, dtype=torch.complex64)
    real_only = torch.complex(ref.real, torch.zeros(64))
    mismatch = compare_tensor(ref, real_only, None, None)
    assert mismatch is not None and "values outside tolerance" in mismatch["reason"]
    assert compare_tensor(ref, ref.clone(), None, None) is None
    assert compare_tensor(ref, ref.conj().resolve_conj().conj(), None, None) is None  # a lazy conjugate is the same


def test_a_kernel_that_writes_only_the_real_part_is_incorrect(build_cache):
    problem = load_problem(REDTEAM / "problems" / "complex_double.py")
    options = EvalOptions(device="cpu", timing=False, shapes="off", cache_dir=build_cache)
    with Evaluator(problem, options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate(redteam("complex_real_part_only"))
    assert verdict.status is Status.INCORRECT and "outside tolerance" in verdict.message, verdict.message


def test_strict_rejects_pytorch_compute_seen_at_runtime_that_names_hide(strict):
    verdict = strict.evaluate(redteam("strict_ignores_runtime_ops"))
    assert verdict.status is Status.REJECTED and "torch_compute_at_runtime" in verdict.message, verdict.message
    # the static check sees `nn.ReLU()(x)` too now (redteam4), so the runtime finding is not the first one named
    assert any(w.code == "torch_compute_at_runtime" and "aten::relu" in w.message for w in verdict.warnings)


def test_an_output_type_name_of_megabytes_is_the_candidates_fault_not_the_references(strict):
    verdict = strict.evaluate(redteam("huge_type_name_blames_reference"))
    assert verdict.status in (Status.INCORRECT, Status.FORMAT_ERROR, Status.REJECTED), verdict.message
    assert not verdict.details.get("reference_lost"), verdict.message
    assert len(verdict.message) < 4000


def test_an_honest_kernel_stays_correct_under_strict(strict):
    from tests.conftest import candidate

    verdict = strict.evaluate(candidate("relu_cpp.py"))
    assert verdict.status is Status.CORRECT, verdict.message


@pytest.mark.parametrize("stopped", [True, False], ids=["candidate_stopped", "nothing_can_stop_it"])
def test_cpu_burned_in_short_lived_processes_while_the_reference_is_timed_gains_nothing(build_cache, monkeypatch,
                                                                                      stopped):  # fmt: skip
    """The burners live a few milliseconds each and are reaped by their shells, so a walk of /proc never
    saw their time; the worker's cgroup keeps it (where cgroups are writable, as for root here). Judged on
    level1/4 at an eighth of its size (problems/matvec_small.py): the attack is the same (2 x ncpu burners
    through every reference round), the inputs drawn for each call are what made level1/4 cost ~100 CPU-s.
    Every process of the candidate's is stopped while the reference is timed, so the burners run only in the
    candidate's own rounds, where they are charged (it was `rejected` before: seen, but only because it took
    more CPU than the allowance, which a burner below it was not). Where nothing can stop the candidate,
    the CPU it used while the reference was timed is still the rejection."""
    from kevin_tui.evaluator.host.cgroups import ResourceGroup
    from kevin_tui.evaluator.host.workers import WorkerProcess

    probe = ResourceGroup(100, 1 << 30)
    counted = probe.cpu_usage is not None
    probe.kill_all()
    if not counted:
        pytest.skip("no writable CPU-accounting cgroup on this machine")
    if not stopped:
        monkeypatch.setattr(WorkerProcess, "held", lambda self: contextlib.nullcontext())
    problem = load_problem(REDTEAM / "problems" / "matvec_small.py")
    options = EvalOptions(device="cpu", timing_trials=5, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(problem, options, prespawn=False) as evaluator:
        attack = evaluator.evaluate(redteam("matvec_burner_reaped_children"))
        twin = evaluator.evaluate(redteam("matvec_burner_honest_twin"))
    if stopped:
        assert attack.status is Status.CORRECT and attack.speedup is not None and attack.speedup < 0.5, attack.message
        # Its burners charged in its own rounds: more than the one core its single-threaded kernel can use
        # (1.14 on the loaded CI machine, where the burners get less of the two cores).
        assert attack.details["cpu_share"] > 1.0
    else:
        assert attack.status is Status.REJECTED and "kept using the CPU" in attack.message, attack.message
    assert twin.status is Status.CORRECT, twin.message


def test_a_result_more_exact_than_the_reference_passes_and_a_less_exact_one_fails():
    """Over a long reduction the float32 reference's own rounding is larger than the tolerance: a result
    within the tolerance of the float64 truth plus that error is right; a bf16-computed one is not."""
    from kevin_tui.evaluator.worker.judge import judge_trial
    from kevin_tui.evaluator.worker.tensorfile import Leaf

    torch.manual_seed(0)
    a, b = torch.randn(256, 131072), torch.randn(131072, 1)
    ref32 = a @ b
    ref64 = a.double() @ b.double()
    truth = redrawn(torch.matmul, a, b)
    exact = ref64.float()
    assert compare_tensor(ref32, exact, None, None) is not None  # judged against ref32 alone, it fails
    verdict = judge_trial(ref32, {"before": Leaf(exact, "cpu"), "after": Leaf(exact.clone(), "cpu")}, "cpu", None,
                          None, "trial 2", precise=truth)  # fmt: skip
    assert verdict.passed, verdict.message
    assert "float32 reference's own error" in verdict.checks[0].detail
    low = (a.bfloat16() @ b.bfloat16()).float()
    runs = {"before": Leaf(low, "cpu"), "after": Leaf(low.clone(), "cpu")}
    verdict = judge_trial(ref32, runs, "cpu", None, None, "trial 2", precise=truth)
    assert not verdict.passed and "outside tolerance" in verdict.message


def test_an_honest_float64_accumulator_is_correct(build_cache):
    """Judged on level1/4 with half its rows (problems/matvec_few_rows.py): every output is the same
    131072-term reduction, so the float32 reference's own rounding is what it is there and outputs near zero
    still fail the plain tolerance: 8 to 12 of the 16 output checks were passed by the float64 judgement
    (all 16 at 256 rows), which the checks name."""
    problem = load_problem(REDTEAM / "problems" / "matvec_few_rows.py")
    options = EvalOptions(device="cpu", timing=False, shapes="off", cache_dir=build_cache)
    with Evaluator(problem, options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate(redteam("honest_matvec_double_accumulate"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert any("float32 reference's own error" in check.detail for check in verdict.checks), verdict.checks


# -- redteam4 (tests/candidates/redteam4/, each docstring says the attack and the verdict it got before) --------

REDTEAM4 = CANDIDATES / "redteam4"


def redteam4(name: str) -> str:
    return (REDTEAM4 / f"{name}.py").read_text()


def _ballast_build(evaluator: Evaluator, name: str, ballast: int):
    """A build of a tiny C extension module carrying `ballast` bytes of data (no torch headers: quick)."""
    import time

    source = (
        f'asm(".pushsection .data\\n{name}_ballast:\\n.fill {ballast},1,0x5a\\n.popsection");\n'
        f'extern "C" int {name}_answer() {{ return 42; }}\n'
    )
    request = {"kind": "inline", "name": name, "cpp_sources": [source], "cuda_sources": [], "sources": [],
               "functions": None, "extra_cflags": [], "extra_cuda_cflags": [], "extra_ldflags": [],
               "extra_include_paths": [], "with_cuda": False, "no_implicit_headers": True}  # fmt: skip
    return evaluator.broker.build(request, evaluator.reference.versions(), source, time.monotonic() + 300)


def test_a_build_may_not_leave_a_huge_library_in_the_persistent_cache(strict, monkeypatch):
    """A `.fill` in a data section makes a library of any size, which the host kept in the cache for good
    (`huge_library_in_cache.py`: 64 MB library and 64 MB object file, `correct`). With the bound at 32 MB
    the builder cannot write it and nothing of it stays; a build under the bound is unaffected."""
    import shutil

    from kevin_tui.evaluator.host import builds

    monkeypatch.setattr(builds, "MAX_BUILD_BYTES", 32 << 20, raising=False)  # absent before the bound
    for made in strict.broker.root.glob("rt4_ballast*"):  # left by an earlier run of this test without the bound
        shutil.rmtree(made)
    huge = _ballast_build(strict, "rt4_ballast_huge", 48 << 20)
    assert not huge.ok, huge.summary()
    assert not [p for p in strict.broker.root.glob("rt4_ballast_huge*/*") if p.stat().st_size > 1 << 20]
    small = _ballast_build(strict, "rt4_ballast_small", 4 << 20)
    assert small.ok, small.message


def test_a_candidate_filling_its_scratch_is_stopped_and_its_files_removed(strict, monkeypatch):
    """`fill_scratch.py` writes 64 MB files until 1 GB: nothing bounded a scratch's total (each file is under
    the per-file limit) and it stayed until the evaluator closed. With the bound lowered, the worker is killed,
    its files are gone, and an honest kernel under the same bound is unaffected."""
    from kevin_tui.evaluator.host import candidate_run
    from tests.conftest import candidate

    monkeypatch.setattr(candidate_run, "SCRATCH_FLOOR", 64 << 20, raising=False)  # absent before the bound
    verdict = strict.evaluate(redteam4("fill_scratch"))
    assert verdict.status is Status.RUNTIME_ERROR and "scratch directory" in verdict.message, verdict.message
    import time

    deadline = time.monotonic() + 30
    while list(strict.scratch.glob("candidate-*/ballast-*")) and time.monotonic() < deadline:
        time.sleep(0.2)  # emptied by the host's watcher once the sandbox is gone
    assert not list(strict.scratch.glob("candidate-*/ballast-*"))
    assert strict.evaluate(candidate("relu_cpp.py")).status is Status.CORRECT
    deadline = time.monotonic() + 30  # and after every run its scratch is emptied but for its log and inputs
    while list(strict.scratch.glob("candidate-*/out-*.kt")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not list(strict.scratch.glob("candidate-*/out-*.kt"))


def test_strict_rejects_tensor_arithmetic_hidden_from_the_runtime_count(strict):
    """`y * (y > 0)` beside a real extension, switched to the extension while the op count's dispatch mode is
    on: `correct` under --strict before; the syntax tree now sees the arithmetic and the probe."""
    verdict = strict.evaluate(redteam4("strict_arithmetic_hides_from_the_count"))
    assert verdict.status is Status.REJECTED and "torch_compute_ops" in verdict.message, verdict.message


@pytest.fixture(scope="module")
def timed_relu(build_cache, relu_problem):
    """A timed evaluator on ReLU (5 timed calls), shared by this module's attacks on the timed inputs."""
    options = EvalOptions(device="cpu", timing_trials=5, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options) as evaluator:  # the second attack finds a worker started
        yield evaluator


def test_rebinding_the_problems_get_inputs_does_not_change_the_timed_inputs(timed_relu):
    """The timed inputs were drawn with the problem module's `get_inputs` as the candidate left it."""
    verdict = timed_relu.evaluate(redteam4("rebind_get_inputs"))
    assert verdict.status is Status.CORRECT, verdict.message


def test_timed_answers_cannot_be_precomputed_from_values_held_before_the_round(timed_relu):
    """`pool_entries_precomputed.py` answers every timed call by selecting among answers it computed on the
    tensors the timer held (the pool's entries): `correct` before, every timed input being a 0/1 mix of
    them. Each timed call now draws a fresh sample inside its round: the selection has nothing to pick from
    and the judged calls fail (the attack's witness)."""
    verdict = timed_relu.evaluate(redteam4("pool_entries_precomputed"))
    assert verdict.status is Status.INCORRECT and "timing round" in verdict.message, verdict.message


def test_the_candidate_is_stopped_while_the_reference_judges_a_timed_round(timed_relu, monkeypatch):
    """(redteam16, open there) Between its rounds the reference judges the round's outputs: a candidate left running
    then had the reference's work and CPU beside its own, uncharged. Every judgement of a timed round is made with
    the candidate's processes stopped, like the reference's own rounds."""
    from kevin_tui.evaluator.host.candidate_run import HostRun
    from kevin_tui.evaluator.host.workers import WorkerProcess

    depth, seen = [0], []
    held, judge = WorkerProcess.held, HostRun.judge

    @contextlib.contextmanager
    def counted(self):
        with held(self):
            depth[0] += 1
            try:
                yield
            finally:
                depth[0] -= 1

    def recorded(self, command, trial=None):
        if command["cmd"] == "judge_timed":
            seen.append(depth[0])
        return judge(self, command, trial)

    monkeypatch.setattr(WorkerProcess, "held", counted)
    monkeypatch.setattr(HostRun, "judge", recorded)
    verdict = timed_relu.evaluate(candidate_source("relu_cpp.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert seen and all(d > 0 for d in seen), seen


def test_a_candidates_failure_cannot_say_the_evaluator_failed(strict):
    """The `final` event's details are the worker's traceback only; anything else is a protocol violation."""
    verdict = strict.evaluate(redteam4("failure_blames_the_evaluator"))
    assert verdict.status in (Status.REJECTED, Status.RUNTIME_ERROR), verdict.message
    assert not verdict.details.get("reference_lost"), verdict.details


def test_an_honest_failure_keeps_its_traceback(strict):
    verdict = strict.evaluate(candidate_source("import_raises.py"))
    assert verdict.status is Status.RUNTIME_ERROR and "traceback" in verdict.details, verdict.details


def test_an_output_file_that_expands_in_the_reader_is_the_candidates_fault(strict):
    """A 1 MB record whose 20,000 tensor nodes all name the same span: the reference worker's reader copied
    every span (20 GB) and died, which blamed the evaluator."""
    verdict = strict.evaluate(redteam4("overlapping_tensors_sink_the_reference"))
    assert not verdict.details.get("reference_lost"), verdict.message
    assert verdict.status in (Status.INCORRECT, Status.REJECTED), verdict.message


def test_a_tensor_file_with_shared_or_empty_tensors_still_reads(tmp_path):
    """The honest writer never overlaps spans: one tensor returned twice is written twice, and reads back."""
    from kevin_tui.evaluator.worker import tensorfile

    y = torch.randn(1000)
    tensorfile.write(tmp_path / "out.kt", [(y, y), torch.empty(0), 1.5])
    (first, second), empty, number = tensorfile.read(tmp_path / "out.kt")
    assert torch.equal(first, y) and torch.equal(second, y) and empty.numel() == 0 and number == 1.5


def test_every_timed_output_is_judged(build_cache):
    """`wrong_on_one_timed_call.py` is wrong on the last call of every timing round only: with three of a
    round's 200 calls judged it was `correct` in 86% of evaluations; every output of a round is judged now."""
    options = EvalOptions(device="cpu", timing_trials=2000, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(load_problem(PROBLEMS / "small_matmul.py"), options, prespawn=False) as matmul:
        verdict = matmul.evaluate(candidate_source("wrong_on_one_timed_call.py"))
    assert verdict.status is Status.INCORRECT, verdict.message
    assert "timing round" in verdict.message and "call 200" in verdict.message, verdict.message


def test_the_tripwire_allows_dynamos_own_wrap_of_manual_seed_and_no_other():
    """Importing torch._dynamo (a custom op's first call, torch.compile, torch.compiler.disable) rebinds
    torch.manual_seed to torch._disable_dynamo(torch.manual_seed); workers import dynamo at their start only
    when their evaluation compiles, so that is an honest candidate's doing. A wrap of anything else is not."""
    from kevin_tui.evaluator.worker.guards import IdentityGuard

    original = torch.manual_seed
    guard = IdentityGuard()
    try:
        torch.manual_seed = torch._disable_dynamo(original)
        assert guard.replaced() == []
        torch.manual_seed = torch._disable_dynamo(lambda seed: None)
        assert guard.replaced() == ["torch.manual_seed"]
    finally:
        torch.manual_seed = original
