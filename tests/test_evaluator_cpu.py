"""The whole pipeline on the CPU, with real worker processes: legitimate and adversarial candidates."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host import nursery as nurseries
from kevin_tui.evaluator.host.workers import spares_paused
from kevin_tui.problem import ProblemError, load_problem
from kevin_tui.processes import descendants, process_state
from tests.conftest import PROBLEMS, candidate, gone_within


@pytest.fixture(scope="module")
def relu(relu_problem, build_cache):
    """One evaluator (one reference worker) for every ReLU candidate in this module."""
    options = EvalOptions(device="cpu", timing=False, timeout_s=20, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:  # spares: their own tests below
        yield evaluator


def check(evaluator: Evaluator, name: str):
    return evaluator.evaluate(candidate(name))


def test_legitimate_pytorch_candidate_is_correct_with_a_warning(relu):
    verdict = check(relu, "relu_torch.py")
    assert verdict.status is Status.CORRECT, verdict.message
    assert [w.code for w in verdict.warnings] == ["no_custom_kernel", "torch_compute_ops", "torch_compute_at_runtime"]
    assert "aten::clamp" in verdict.warnings[2].message  # what forward really dispatched
    names = {c.name for c in verdict.checks}
    assert "output trial 5 (after the reference)" in names and all(c.passed for c in verdict.checks)


def test_strict_rejects_what_static_checks_find(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, strict=True, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        verdict = check(evaluator, "relu_torch.py")
    assert verdict.status is Status.REJECTED and "no_custom_kernel" in verdict.message
    assert verdict.details["unstrict_status"] == "correct"


@pytest.mark.parametrize(
    ("name", "status", "evidence"),
    [
        ("mutate_input.py", Status.INCORRECT, "changed its inputs"),
        ("stale_cache.py", Status.INCORRECT, "previous call"),
        ("tensor_subclass.py", Status.INCORRECT, "not a plain torch.Tensor"),
        ("async_thread.py", Status.INCORRECT, "wrong output"),  # its output is copied before the thread writes it
        ("patched_timer.py", Status.REJECTED, "time.perf_counter"),
        ("patched_allclose.py", Status.REJECTED, "torch.allclose"),
        ("slightly_wrong.py", Status.INCORRECT, "outside tolerance"),
        ("wrong_shape.py", Status.INCORRECT, "shape"),
        ("nan_output.py", Status.INCORRECT, "NaN"),
        ("no_model_new.py", Status.FORMAT_ERROR, "ModelNew"),
        ("wrong_signature.py", Status.FORMAT_ERROR, "argument"),
        ("syntax_error.py", Status.COMPILE_ERROR, "line 5"),
        ("import_raises.py", Status.RUNTIME_ERROR, "setup failed"),
        ("segfault.py", Status.RUNTIME_ERROR, "SIGSEGV"),
        ("os_exit.py", Status.RUNTIME_ERROR, "exited with code 0"),
    ],
)
def test_adversarial_and_broken_candidates(relu, name, status, evidence):
    verdict = check(relu, name)
    assert verdict.status is status, f"{name}: {verdict.status} {verdict.message}"
    assert evidence in verdict.message, verdict.message


def test_inputs_holding_nan_by_design_are_still_checked_unchanged(build_cache):
    """NaN is not equal to itself: the reference's probe once read a NaN input as changed by the reference,
    which allowed every candidate to change its inputs."""
    problem = load_problem(PROBLEMS / "nan_inputs.py")
    with Evaluator(
        problem, EvalOptions(device="cpu", timing=False, cache_dir=build_cache), prespawn=False
    ) as evaluator:
        overwrites = check(evaluator, "nan_inputs_overwritten.py")
        honest = check(evaluator, "nanmean_masked.py")
    assert overwrites.status is Status.INCORRECT and "changed its inputs in place" in overwrites.message
    assert honest.status is Status.CORRECT, honest.message
    assert next(c for c in honest.checks if c.name == "inputs unchanged").detail == ""  # not "changes them too"


def test_mismatch_evidence(relu):
    mismatch = check(relu, "slightly_wrong.py").details["mismatch"]
    assert mismatch["max_abs_error"] > 0 and mismatch["max_rel_error"] == pytest.approx(1e-3, rel=0.01)
    assert mismatch["trial"] == 1 and mismatch["order"] == "before"
    assert len(mismatch["worst_index"]) == 2


def test_credentials_are_not_visible_to_generated_code(relu, monkeypatch):
    # The evaluator filtered its environment when created; a fresh one sees the secret in ours.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-must-not-leak")
    monkeypatch.setenv("HF_TOKEN", "hf-test-must-not-leak")
    with Evaluator(relu.problem, relu.options, prespawn=False) as evaluator:
        verdict = check(evaluator, "leaked_env.py")
    assert verdict.status is Status.CORRECT, verdict.message


def test_hang_is_killed_with_its_whole_process_group(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, timeout_s=4, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        started = time.monotonic()
        verdict = check(evaluator, "hang_with_child.py")
        elapsed = time.monotonic() - started
        assert gone_within("kevin-hang-child", 1.0), "the candidate's child outlived its verdict"
    assert verdict.status is Status.TIMEOUT and "check phase" in verdict.message
    assert elapsed < 30


def test_the_caller_survives_and_the_evaluator_keeps_working(relu):
    assert check(relu, "segfault.py").status is Status.RUNTIME_ERROR
    assert check(relu, "relu_torch.py").status is Status.CORRECT


def test_timing_reports_median_and_spread(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing_trials=20, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        verdict = check(evaluator, "relu_torch.py")
    assert verdict.status is Status.CORRECT
    cand = verdict.timings["candidate_wall"]
    assert cand.trials >= 20 and cand.min_ms <= cand.median_ms <= cand.max_ms
    assert verdict.details["measured_speedup"] == pytest.approx(verdict.reference_ms / verdict.candidate_ms, rel=1e-3)
    assert verdict.timings["candidate_host"].trials == verdict.timings["reference_host"].trials  # one per round
    assert verdict.speedup_compile is None  # compile baseline is off by default on CPU


def test_compile_baseline_on_cpu(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing_trials=10, compile_baseline=True, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        verdict = check(evaluator, "relu_torch.py")
    assert verdict.status is Status.CORRECT
    assert verdict.reference_compile_ms is not None and verdict.speedup_compile is not None


def test_zeros_fail_on_a_tiny_output_problem_and_honest_maths_passes(build_cache):
    problem = load_problem(PROBLEMS / "tiny_output.py")
    with Evaluator(
        problem, EvalOptions(device="cpu", timing=False, cache_dir=build_cache), prespawn=False
    ) as evaluator:
        zeros = evaluator.evaluate(candidate("tiny_zeros.py"))
        honest = evaluator.evaluate(candidate("tiny_ok.py"))
    assert zeros.status is Status.INCORRECT and "constant" in zeros.message
    assert honest.status is Status.CORRECT, honest.message


@pytest.mark.parametrize(
    ("name", "evidence"),
    [
        ("missing_get_inputs.py", "get_inputs"),
        ("reference_raises.py", "reference forward raised"),
        ("syntax_error.py", "syntax error"),
    ],
)
def test_unusable_problems_raise_problem_error(name, evidence, build_cache):
    with pytest.raises(ProblemError, match=evidence):
        problem = load_problem(PROBLEMS / name)
        with Evaluator(problem, EvalOptions(device="cpu", cache_dir=build_cache), prespawn=False) as evaluator:
            evaluator.evaluate(candidate("relu_torch.py"))


def test_a_dead_reference_worker_is_reported_and_restarted(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        assert check(evaluator, "relu_torch.py").status is Status.CORRECT
        evaluator.reference.process.kill()  # e.g. the OOM killer
        lost = check(evaluator, "relu_torch.py")
        assert lost.status is Status.RUNTIME_ERROR and "reference worker" in lost.message
        assert lost.details["reference_lost"]
        assert check(evaluator, "relu_torch.py").status is Status.CORRECT  # a fresh reference worker


@pytest.mark.parametrize("sandbox", ["bwrap", "unshare", "off"])
def test_workers_die_with_their_parent_even_when_it_is_sigkilled(tmp_path, build_cache, sandbox):
    import signal
    import subprocess
    import sys

    from tests.conftest import RELU, processes_with

    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, threading, time\n"
        "from kevin_tui.evaluator import EvalOptions, Evaluator\n"
        "from kevin_tui.problem import load_problem\n"
        f"ev = Evaluator(load_problem({str(RELU)!r}), EvalOptions(device='cpu', timing=False, timeout_s=600,\n"
        f"               sandbox={sandbox!r}, cache_dir=__import__('pathlib').Path({str(build_cache)!r})))\n"
        f"source = open({str(Path(__file__).parent / 'candidates' / 'hang_with_child.py')!r}).read()\n"
        "print(ev.scratch, flush=True)\n"
        "threading.Thread(target=ev.evaluate, args=(source,), daemon=True).start()\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, str(script)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        stdout=subprocess.PIPE,
        text=True,
    )
    scratch = Path(parent.stdout.readline().strip())
    deadline = time.monotonic() + 60
    while not processes_with("kevin-hang-child"):
        assert time.monotonic() < deadline, "the hanging candidate never started"
        time.sleep(0.2)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert gone_within("kevin-hang-child", 10), "the candidate's child outlived the SIGKILLed parent"
    # Its scratch directory (inputs, outputs, logs) outlives it, until the next evaluator sweeps it.
    assert scratch.is_dir()
    from kevin_tui.evaluator.host.scratch import make_scratch

    shutil.rmtree(make_scratch())
    assert not scratch.exists(), "a dead evaluator's scratch directory was not swept"


def test_scratch_sweep_keeps_live_owners_and_foreign_directories(tmp_path):
    from kevin_tui.evaluator.host.scratch import OWNER_FILE, PREFIX, sweep_stale
    from kevin_tui.processes import process_start

    live, dead, foreign = (tmp_path / f"{PREFIX}{name}" for name in ("live", "dead", "foreign"))
    for directory in (live, dead, foreign):
        directory.mkdir()
    (live / OWNER_FILE).write_text(f"{os.getpid()} {process_start(os.getpid())}\n")
    (dead / OWNER_FILE).write_text(f"{os.getpid()} 1\n")  # our pid, another start time: pid reused
    assert sweep_stale(tmp_path) == [dead]
    assert live.is_dir() and foreign.is_dir()


def test_a_clock_check_missed_once_is_measured_again_and_the_second_measurement_decides(monkeypatch):
    """On a loaded machine an honest kernel can miss the clock check once; a cheat misses it every time."""
    from kevin_tui.evaluator.host.candidate_run import HostRun
    from kevin_tui.evaluator.host.decisions import Finding, decide

    missed = decide(
        Finding.CLOCK_DISAGREES, "timings disagree with the host's clock: ...", evidence={"clock_check": {"n": 1}}
    )
    outcomes = [missed, decide(Finding.CORRECT, "correct, 1.00x")]
    monkeypatch.setattr(HostRun, "measure", lambda self: outcomes.pop(0))
    verdict = HostRun.time(object.__new__(HostRun))
    assert verdict.status is Status.CORRECT and verdict.evidence["clock_check_first_attempt"] == {"n": 1}

    outcomes = [missed, decide(Finding.CLOCK_DISAGREES, "again", evidence={"clock_check": {"n": 2}})]
    verdict = HostRun.time(object.__new__(HostRun))
    assert verdict.status is Status.REJECTED and verdict.message == "again" and not outcomes
    outcomes = [decide(Finding.CPU_KEPT_BUSY, "left threads running")]  # other rejections are not measured again
    assert HostRun.time(object.__new__(HostRun)).message == "left threads running" and not outcomes


def test_the_next_spare_starts_while_this_candidate_is_judged_and_serves_only_the_next(relu, monkeypatch):
    """The spare is started as soon as the current candidate's worker is taken (its start overlaps this
    candidate's build and checks), never after the verdict; each candidate gets a worker no other ever had."""
    seen: dict[Path | None, Path | None] = {}  # this candidate's worker log: the spare's, when its check began

    def on_progress(phase: str, detail: str) -> None:
        if phase == "check":
            seen.setdefault(relu._candidate_log, relu._spares[0][0].log_path if relu._spares else None)

    monkeypatch.setattr(relu, "run_context", replace(relu.run_context, on_progress=on_progress))
    monkeypatch.setattr(relu, "prespawn", True)  # the module's evaluator keeps none (none wasted at its end)
    for _ in range(2):
        assert check(relu, "relu_torch.py").status is Status.CORRECT
    (first, first_spare), (second, second_spare) = seen.items()
    assert first_spare is not None and second_spare is not None, "no spare was started during the evaluation"
    assert second == first_spare  # the spare went to the next candidate
    assert len({first, second, second_spare}) == 3  # and no worker served two candidates


def test_with_two_spares_a_burst_of_evaluations_each_takes_a_worker_already_started(relu_problem, build_cache):
    """`spare_workers=2`: the second evaluation of a burst finds a started worker too (with one spare it
    waits for the spare begun at the previous take), and every candidate still has a worker of its own."""
    options = EvalOptions(device="cpu", timing=False, timeout_s=20, cache_dir=build_cache, spare_workers=2)
    with Evaluator(relu_problem, options) as evaluator:
        assert check(evaluator, "relu_torch.py").status is Status.CORRECT
        spares = [worker for worker, _ in evaluator._spares]
        assert len(spares) == 2
        for worker in spares:
            worker.wait_started(120)
        logs = []
        for expected in spares:  # back to back, no pause: the oldest spare goes first
            assert evaluator._spares[0][0] is expected and expected.started.is_set()
            assert check(evaluator, "relu_torch.py").status is Status.CORRECT
            logs.append(evaluator._candidate_log)
            assert len(evaluator._spares) == 2  # topped up at each take
        assert logs == [worker.log_path for worker in spares] and len(set(logs)) == 2


def test_spares_still_starting_are_stopped_while_a_kernel_is_timed(relu, monkeypatch):
    """`spares_paused` (around every timing) stops each process of a spare still importing torch, one
    held before it began and one held during it, and lets both finish starting once it ends. Cold starts: a
    worker forked warm is ready in hundredths of a second, before it could be caught starting (a nursery still
    importing is stopped the same way: tests/test_nursery.py)."""
    monkeypatch.setenv(nurseries.DISABLE, "1")
    early, _ = relu.spawn_candidate_worker()
    early.hold_as_spare()
    late = None
    try:
        deadline = time.monotonic() + 30
        while len(descendants(early.proc.pid)) < (2 if early.wrapped else 1) and time.monotonic() < deadline:
            time.sleep(0.01)  # the sandbox has made the worker's process: the pause must find it too
        with spares_paused():
            late, _ = relu.spawn_candidate_worker()
            late.hold_as_spare()
            trees = [descendants(worker.proc.pid) for worker in (early, late)]
            time.sleep(0.5)  # stopped processes neither fork nor finish starting
            assert [descendants(worker.proc.pid) for worker in (early, late)] == trees
            assert len(trees[0]) >= (2 if early.wrapped else 1), trees  # the sandbox tool and the worker below
            states = [process_state(pid) for tree in trees for pid in tree]
            assert all(state in ("T", "t") for state in states), states
            assert not early.started.is_set() and not late.started.is_set()
        for worker in (early, late):
            worker.wait_started(120)
            assert worker.started.is_set() and worker.alive()
    finally:
        early.kill()
        if late is not None:
            late.kill()


def test_workers_start_without_dynamo_unless_their_evaluation_compiles(relu, monkeypatch):
    """torch._dynamo is 40% of a worker's start and changes no eager op's time (bench/trust_bench.py --aa):
    neither a prebuilding worker (batch mode) nor one that judges imports it when nothing is compiled, up to
    the verdict (the op count's dispatch mode would import it on its first op)."""
    judged: list[str] = []

    def on_progress(phase: str, detail: str) -> None:
        if phase == "done" and relu._candidate_log is not None and not judged:
            judged.extend((relu._candidate_log.parent / "dynamo-imported.txt").read_text().splitlines())

    source = candidate("reports_dynamo.py")
    relu.prebuild([source])
    built = [path.read_text() for path in relu.scratch.glob("candidate-*/dynamo-imported.txt")]
    monkeypatch.setattr(relu, "run_context", replace(relu.run_context, on_progress=on_progress))
    verdict = relu.evaluate(source)
    assert verdict.status is Status.CORRECT, verdict.message
    assert "op_counts" in verdict.details  # the last forward ran under the op counter
    assert built == ["import False\n"]
    assert judged[0] == "import False" and len(judged) > 2 and set(judged[1:]) == {"forward False"}, judged
