"""Attacks a seventh red team wrote against the evaluator after the sixth's fixes
(tests/candidates/redteam7/, each file's docstring says the attack, its true verdict and what it got
before the fix), with their honest counterparts."""

from __future__ import annotations

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, PROBLEMS, candidate

REDTEAM7 = CANDIDATES / "redteam7"


def redteam7(name: str) -> str:
    return (REDTEAM7 / f"{name}.py").read_text()


@pytest.fixture(scope="module")
def small_matmul(build_cache):
    """A timed evaluator on a small matmul (four rounds of three calls), one per test module."""
    options = EvalOptions(device="cpu", timing_trials=10, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(load_problem(PROBLEMS / "small_matmul.py"), options, prespawn=False) as evaluator:
        yield evaluator


# -- work after the reply ------------------------------------------------------------------------------------


def test_a_round_file_finished_after_the_reply_is_not_judged_correct(small_matmul):
    """lease_defers_the_work.py: every timed call returned an empty tensor; after the worker closed the round's
    file the candidate held a write lease on it, so the reference's read waited while a thread of the
    candidate computed the outputs into it, untimed (`correct` at 263x on matmul_1024 for a loop slower than
    MKL). The host now stops the candidate's processes until its outputs are read, and the reference opens the
    file without blocking: a leased file is unusable."""
    verdict = small_matmul.evaluate(redteam7("lease_defers_the_work"))
    assert verdict.status is Status.INCORRECT, verdict.message
    assert "timing round 1" in verdict.message and "lease" in verdict.message


def test_an_honest_loop_kernel_stays_correct_while_its_rounds_are_read(small_matmul):
    verdict = small_matmul.evaluate(redteam7("honest_matmul_loop_twin"))
    assert verdict.status is Status.CORRECT, verdict.message


# -- binding objects -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [["-Wp,-imacros,cuda.cu"], ["-Xpreprocessor", "-imacros", "-Xpreprocessor", "cuda.cu"], ["--imacros=cuda.cu"],
     ["--sysroot=."], ["-fauto-profile=cuda.cu"], ["-Wa,-I."], ["-I."], ["-include", "cuda.cu"]],
)  # fmt: skip
def test_a_main_cpp_compiled_with_flags_that_read_files_is_never_reused(flags):
    """binding_reads_cuda_source_*.py: `-Wp,-imacros,cuda.cu` made the preprocessor read the build's CUDA source
    (not in the reuse key) while compiling main.cpp: a second build differing only there linked the first's
    main.o and was judged on a binary its own source does not make."""
    from kevin_tui.evaluator.host.bindings import reusable

    source = redteam7("binding_reads_cuda_source_first").split('cpp_source = r"""', 1)[1].split('"""', 1)[0]
    spec = {"cpp_sources": [source], "extra_include_paths": []}
    assert reusable({**spec, "extra_cflags": ["-O3"]})
    assert not reusable({**spec, "extra_cflags": ["-O3", *flags]})


def test_honest_compiler_flags_keep_the_binding_object_reusable():
    from kevin_tui.evaluator.host.bindings import reusable

    flags = ["-O3", "-std=c++17", "-march=native", "-ffast-math", "-DNDEBUG", "-funroll-loops", "-fopenmp", "-g",
             "-Wno-unused-variable", "-fvisibility=hidden", "-mavx2", '-DNAME="a b"', "-U_FORTIFY_SOURCE"]  # fmt: skip
    assert reusable({"cpp_sources": ["#include <vector>\nint f();"], "extra_include_paths": [], "extra_cflags": flags})


# -- --strict reads what the library looks up ------------------------------------------------------------------


def test_strict_rejects_a_kernel_looked_up_by_name_at_runtime(strict):
    """strict_kernel_found_by_dlsym.py: `at::cpu::clamp_min` found with dlsym by a mangled name pieced together at
    runtime: no `at::` in the text, no PyTorch import in the library, no dispatch (`correct` under --strict)."""
    verdict = strict.evaluate(redteam7("strict_kernel_found_by_dlsym"))
    assert verdict.status is Status.REJECTED and "torch_compute_in_extension" in verdict.message, verdict.message
    assert any(call.startswith("dlsym") for call in verdict.details["builds"][0]["torch_calls"])


def test_strict_rejects_pytorch_compute_spelt_by_token_pasting_with_the_count_blinded(strict, monkeypatch):
    """strict_pasted_names_blind_the_count.py: `at::clamp_min` and the guard that excludes the Python dispatch
    keys, both built with `##`, so the text holds neither name and the op count saw nothing (`correct` under
    --strict, no warning). The dispatcher entry the library imports names the operator. (Pasting is a text finding
    of its own since redteam17; switched off here, so this proves the library's imports alone still reject it.)"""
    import re

    from kevin_tui.evaluator.host import static_checks

    assert any("##" in f for f in static_checks.cpp_torch_compute(redteam7("strict_pasted_names_blind_the_count")))
    monkeypatch.setattr(static_checks, "PASTE", re.compile(r"(?!)"))
    verdict = strict.evaluate(redteam7("strict_pasted_names_blind_the_count"))
    assert verdict.status is Status.REJECTED and "at::_ops::clamp_min" in verdict.message, verdict.message


def test_dispatcher_entries_are_compute_by_their_operator_not_their_overload():
    from kevin_tui.evaluator.host.static_checks import compute_operator

    for name in ("clamp_min", "mul_Tensor", "sum_dim_IntList", "sub__Tensor", "addmm", "max_pool2d_with_indices",
                 "threshold", "index_select", "where_self"):  # fmt: skip
        assert compute_operator(name), name
    for name in ("empty_like", "empty_memory_format", "zeros_like", "contiguous", "reshape", "view", "expand_as",
                 "fill__Scalar", "clone", "narrow", "t", "transpose_int", "copy_", "_to_copy", "_reshape_alias"):  # fmt: skip
        assert not compute_operator(name), name


def test_a_round_file_larger_than_its_outputs_is_not_read(small_matmul):
    """sparse_round_file.py: right outputs in a round file extended to 256 MB of hole, which the reference read
    whole every round (the candidate's choice of size, up to the reference's memory limit)."""
    verdict = small_matmul.evaluate(redteam7("sparse_round_file"))
    assert verdict.status is Status.INCORRECT and "more than" in verdict.message, verdict.message


def test_a_trial_file_larger_than_its_outputs_is_not_read(small_matmul):
    """sparse_trial_file.py: the same hole in each trial's output file, which the reference read whole."""
    verdict = small_matmul.evaluate(candidate("sparse_trial_file.py"))
    assert verdict.status is Status.INCORRECT and "more than" in verdict.message, verdict.message
