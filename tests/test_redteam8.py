"""Attacks an eighth red team wrote against the evaluator after the seventh's fixes
(tests/candidates/redteam8/, each file's docstring says the attack, its true verdict and what it got
before the fix), with their honest counterparts."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from tests.conftest import CANDIDATES

REDTEAM8 = CANDIDATES / "redteam8"


def redteam8(name: str) -> str:
    return (REDTEAM8 / f"{name}.py").read_text()


# -- the timing loop holds no work the candidate's copy of it can skip ----------------------------------------


def test_drawing_a_timed_call_takes_no_stack_trace(monkeypatch):
    """lean_seeding_hides_the_kernel.py: `torch.manual_seed` on a machine where CUDA is not initialised queues a
    lazy seed per device type with a `traceback.format_stack()` each, ~0.1-0.3 ms in every timed call's drawing,
    which the host credits to both sides as the reference's loop overhead. The candidate rebound the loop's
    `seeded` to seed the CPU generator alone and spent the time saved on its ReLU: `correct` at 20.6x for a
    plain loop (its honest twin: 0.95x). The loop now seeds the generators the draw uses directly."""
    import torch

    from kevin_tui.evaluator.worker.inputs import TimedInputs, call_seed

    def get_inputs() -> list[Any]:
        return [torch.randn(4, 8), torch.randint(0, 9, (3,))]

    traces = []
    monkeypatch.setattr(traceback, "format_stack", lambda *a, **k: traces.append(1) or [])
    drawn = TimedInputs(get_inputs, "cpu").args(1234, 5)
    assert traces == [], "a stack trace taken in a timed call's drawing"
    monkeypatch.undo()
    torch.manual_seed(call_seed(1234, 5))
    expected = get_inputs()
    assert all(torch.equal(a, b) for a, b in zip(drawn, expected, strict=True)), "not the values torch's seed draws"


def test_the_reference_does_not_remove_its_round_file_inside_its_window(tmp_path: Path):
    """The reference's round wrote its outputs like the candidate's and removed the file (~1 ms for 16 MB) before
    its reply, inside the window the host times; the candidate's file is taken by the host after the reply. The
    difference was loop overhead credited to the candidate that it never pays. The host removes both now, after
    the reply (tests/test_trust_aa.py: work a worker left for after its reply landed in the candidate's windows)."""
    import torch

    from kevin_tui.evaluator.worker.channel import Channel
    from kevin_tui.evaluator.worker.guards import IdentityGuard, RoundWatch
    from kevin_tui.evaluator.worker.inputs import TimedInputs
    from kevin_tui.evaluator.worker.reference import Reference
    from kevin_tui.evaluator.worker.timing_loop import Timer

    path = tmp_path / "round-eager.kt"
    replies: list[bool] = []

    class Recorder(Channel):
        def __init__(self) -> None:
            pass

        def emit(self, event: str, **fields: Any) -> None:
            replies.append(path.exists())

    reference = Reference.__new__(Reference)
    reference.outbox, reference.channel, reference.round_seeds = tmp_path, Recorder(), {}
    inputs, watch = TimedInputs(lambda: [torch.ones(4)], "cpu"), RoundWatch(IdentityGuard())
    reference.timers = {"eager": Timer(lambda args: args[0] * 2, inputs, "cpu", watch)}
    reference.round({"side": "eager", "round": 1, "calls": 3, "seed": 7})
    assert replies == [True], "the round file was removed before the reply (inside the host's window)"


# -- static checks: an identity test is no compute ------------------------------------------------------------


def test_identity_tests_in_forward_are_not_tensor_comparisons():
    """honest_strict_identity_checks.py: `assert x is not None` and `out is not x` in forward were "a tensor
    comparison", PyTorch compute, and `rejected` under --strict; `y * (y > 0)` still is one."""
    from kevin_tui.evaluator.host.static_checks import run_static_checks

    codes = [w.code for w in run_static_checks(redteam8("honest_strict_identity_checks"))]
    assert "torch_compute_ops" not in codes, codes
    arithmetic = redteam8("honest_strict_identity_checks").replace("return out\n", "return out * (out > 0)\n")
    assert "torch_compute_ops" in [w.code for w in run_static_checks(arithmetic)]


# -- precision is measured where the kernel is timed too ------------------------------------------------------


@pytest.fixture(scope="module")
def timed_relu(relu_problem, build_cache):
    """A timed evaluator on ReLU (a few short rounds), one per test module."""
    options = EvalOptions(device="cpu", timing_trials=10, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


def test_a_kernel_narrow_only_after_its_first_trial_gets_the_lower_precision_warning(timed_relu):
    """lower_precision_after_the_first_trial.py: exact on its first two calls, where precision was measured (the
    first trial), 14 mantissa bits on every later one: `correct` with no warning, also under --strict. One timed
    call, named by the host after the round's outputs were committed, is measured against float64 too."""
    verdict = timed_relu.evaluate(redteam8("lower_precision_after_the_first_trial"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert "lower_precision" in {w.code for w in verdict.warnings}, verdict.evidence.get("precision")


# -- --strict: C++ that calls back into Python ----------------------------------------------------------------


def test_strict_rejects_a_kernel_calling_torch_back_through_python(strict, monkeypatch):
    """strict_python_callback_blinds_the_count.py: the C++ imports `torch` with pybind11 and calls `torch.relu`
    by attribute name inside `torch._C._DisableTorchDispatch()`, every name pasted: no `at::` text, no PyTorch
    symbol, no dispatch the op count sees (`correct` under --strict). Python's import and call machinery among the
    library's imports is a finding now. (Pasting is a text finding of its own since redteam17; switched off here, so
    this proves the library's imports alone still reject it.)"""
    import re

    from kevin_tui.evaluator.host import static_checks

    monkeypatch.setattr(static_checks, "PASTE", re.compile(r"(?!)"))
    verdict = strict.evaluate(redteam8("strict_python_callback_blinds_the_count"))
    assert verdict.status is Status.REJECTED, verdict.message
    assert "PyImport_ImportModule" in verdict.message


def test_strict_reads_python_calls_in_the_cpp_text_and_keeps_honest_kernels(strict):
    """The same calls written out are named in the text; an honest C++ kernel (pybind11's glue imports none of
    Python's import or call machinery) stays correct under --strict, with identity tests in its forward."""
    from kevin_tui.evaluator.host.static_checks import cpp_torch_compute

    text = 'auto t = pybind11::module_::import("torch"); return t.attr("relu")(x).cast<torch::Tensor>();'
    assert {"module_::import", ".attr("} <= set(cpp_torch_compute(text))
    verdict = strict.evaluate(redteam8("honest_strict_identity_checks"))
    assert verdict.status is Status.CORRECT, verdict.message


# -- builds: a denied flag handed on as another option's value ------------------------------------------------


@pytest.mark.parametrize(
    "flag",
    ["-Xcompiler=-wrapper,/usr/bin/echo", "--compiler-options=-fplugin=/x.so", "-Xcompiler=-B/tmp",
     "-Xcompiler=@args", "-Xptxas=-o,elsewhere", "--compiler-options=-O2,-specs=x"],
)  # fmt: skip
def test_a_denied_flag_given_as_an_option_value_is_refused(flag):
    """denied_flag_as_an_option_value.py: `-Xcompiler=-wrapper,/usr/bin/echo` passed the deny list (its parts are
    `-Xcompiler=-wrapper` and `/usr/bin/echo`) and nvcc's host compiler ran echo in the builder."""
    from kevin_tui.evaluator.host.builds import FlagRefused, normalise_flags

    with pytest.raises(FlagRefused):
        normalise_flags([flag])


def test_honest_option_values_pass():
    from kevin_tui.evaluator.host.builds import normalise_flags

    flags = ["-Xcompiler=-fPIC", "--compiler-options=-O3,-fopenmp", "-Xptxas=-v", "-DOFFSET=-1", "-Xcompiler=-march=native",
             "--use_fast_math", "-Xcompiler", "-Wall"]  # fmt: skip
    assert normalise_flags(flags) == flags
