"""The red team's forged-verdict candidates (tests/candidates/forge, written against the evaluator as it
was, by someone who had read it) and their honest counterparts (tests/candidates/honest).

Every forge candidate, judged under --strict, is either not `correct`, or `correct` at its real speed
(its trick failed and it ran honestly: the forged figures were 5x-150x). Every honest one is `correct`.
Attacks aimed at the *next* candidate are run in one Evaluator, as `optimize` does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, KERNELBENCH, candidate

FORGE = CANDIDATES / "forge"
HONEST = CANDIDATES / "honest"
REAL_SPEED = 2.0  # the honest C++ kernel the forge files share runs at ~0.6x on the CPU

EXPECTED = {
    "protocol_forged_checked_timed": None,
    "protocol_forged_final": {Status.REJECTED},
    "protocol_forged_timed_only": None,
    "protocol_malformed_event": {Status.REJECTED},
    "protocol_phase_keepalive": {Status.REJECTED},
    "protocol_crash_reference": {Status.REJECTED, Status.RUNTIME_ERROR},
    "judge_hijack_sympy": None,
    "output_lazy_tuple": {Status.INCORRECT, Status.REJECTED},
    "output_list": {Status.INCORRECT, Status.REJECTED},
    "output_function_mode": {Status.INCORRECT, Status.REJECTED},
    "output_dispatch_mode": {Status.INCORRECT, Status.REJECTED},
    "output_torch_save_code_swap": {Status.INCORRECT, Status.REJECTED},
    "memo_same_object": None,
    "memo_fingerprint": {Status.INCORRECT, Status.REJECTED},
    "memo_check_only": None,
    "inputs_file_lookup": None,
    "inputs_seed_replay": None,
    "timing_module_globals": None,
    "timing_from_samples": None,
    "timing_time_call": None,
    "timing_guard_snapshot": None,
    "timing_ctypes_vectorcall": None,  # its faked clock no longer matters: the host clock gives its real speed
    # the thread's work lands in the round the host times (and its CPU time is charged): its docstring's
    # "correct at the real speed" is a true verdict too, and the speedup check below holds it to that
    "timing_hidden_thread": {Status.INCORRECT, Status.REJECTED, Status.CORRECT},
    "timing_guard_class_patch": None,
    "timing_pin_reference": None,
    "cache_poison_so": {Status.CORRECT, Status.REJECTED},  # not runtime_error: that is the attack not running
    "static_docstring_kernel": {Status.REJECTED},
    "static_unused_kernel": {Status.REJECTED},
    "static_suppress_fallback": {Status.REJECTED, Status.COMPILE_ERROR},
    "static_subclass_alias": {Status.REJECTED},
    "static_frame_introspection": {Status.REJECTED},
}  # None: anything but a correct verdict at a forged speed


AIMED_AT_THE_NEXT = {"protocol_crash_reference", "judge_hijack_sympy", "timing_pin_reference", "cache_poison_so"}


def test_every_forge_candidate_is_listed():
    assert {p.stem for p in FORGE.glob("*.py")} - {"two_in_a_row"} == set(EXPECTED)


@pytest.fixture(scope="module")
def strict(relu_problem, build_cache):
    options = EvalOptions(
        device="cpu", strict=True, timing_trials=10, shapes="off", profile=False, cache_dir=build_cache
    )
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_forged_verdict_is_not_believed(strict, name):
    verdict = strict.evaluate((FORGE / f"{name}.py").read_text())
    expected = EXPECTED[name]
    if expected is not None:
        assert verdict.status in expected, f"{name}: {verdict.status} {verdict.message}"
    if verdict.status is Status.CORRECT:
        assert verdict.speedup is not None and verdict.speedup < REAL_SPEED, f"{name}: {verdict.message}"
    if name in AIMED_AT_THE_NEXT:  # the next honest candidate in the same evaluator is judged as usual
        follow = strict.evaluate(candidate("relu_cpp.py"))
        assert follow.status is Status.CORRECT, f"after {name}: {follow.message}"
        assert follow.speedup < REAL_SPEED, f"after {name}: {follow.message}"


def test_a_wrong_candidate_after_a_judge_attack_is_still_wrong(strict):
    strict.evaluate((FORGE / "judge_hijack_sympy.py").read_text())
    assert strict.evaluate(candidate("relu_cpp_wrong.py")).status is Status.INCORRECT


HONEST_PROBLEMS = {
    "gemm_pretransposed": "level2/12_Gemm_Multiply_LeakyReLU.py",
    "sum_reduction_pairwise": "level1/47_Sum_reduction_over_a_dimension.py",
    "softmax_online": "level1/23_Softmax.py",
}


@pytest.fixture(scope="module")
def honest_judge(build_cache, relu_problem) -> Iterator[Callable[[str], Evaluator]]:
    """One timing evaluator per problem, for the honest kernels only (they attack nothing, so each is judged
    after another as in a session): the seven ReLU kernels share one reference worker."""
    options = EvalOptions(device="cpu", timing_trials=10, cache_dir=build_cache)
    with contextlib.ExitStack() as stack:
        made: dict[str, Evaluator] = {}

        def judge(name: str) -> Evaluator:
            where = HONEST_PROBLEMS.get(name, "")
            if where not in made:
                problem = load_problem(KERNELBENCH / where) if where else relu_problem
                made[where] = stack.enter_context(Evaluator(problem, options, prespawn=False))
            return made[where]

        yield judge


@pytest.mark.parametrize("name", sorted(p.stem for p in HONEST.glob("*.py")))
def test_an_honest_kernel_stays_correct(honest_judge, name):
    verdict = honest_judge(name).evaluate((HONEST / f"{name}.py").read_text())
    if name == "relu_reused_output_buffer":  # our rule: a module's result must stay valid after the next call
        assert verdict.status is Status.INCORRECT and "reused" in verdict.message, verdict.message
        return
    assert verdict.status is Status.CORRECT, f"{name}: {verdict.message}"
