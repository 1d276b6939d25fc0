"""Attacks a fourteenth red team wrote against the host's own work on the candidate's text: its syntax tree walked
by recursive visitors, its C++ scanned by regular expressions (tests/candidates/redteam14/, each file's docstring
says the attack, its true verdict and what it got before the fix)."""

from __future__ import annotations

import sys
import time

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.evaluator.host.candidate_run import GLOBAL_KERNEL
from kevin_tui.evaluator.host.static_checks import cpp_torch_compute, run_static_checks
from kevin_tui.evaluator.verdict import Status
from kevin_tui.tui.render import cuda_sources
from tests.conftest import candidate

HOST_BOUND_S = 10.0  # the scans below took the host hours before (quadratic): this bounds them, it times nothing


@pytest.fixture(autouse=True)
def python_default_recursion_limit():
    """Python's default limit (1000), the host's own: an earlier test in the same process raised it (CI, in an order
    the suite had not run before), and then 600 terms no longer overflow the checks. Deep code is then simply read."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(before)


@pytest.fixture(scope="module")
def untimed(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


def test_code_nested_too_deeply_for_the_host_is_the_candidates_verdict_never_the_hosts_crash(untimed):
    """deep_expression_crashes_host.py (600 terms, which Python compiles) made the static checks' recursive visitors
    raise RecursionError out of `Evaluator.judge`: `eval` crashed, and `optimize` or a batch run would have lost the
    turn or the run. It is judged now, with a finding that says the checks could not read it all (a rejection under
    --strict). uncompilable_depth_crashes_host.py (3,000 terms) made the host's own parse raise: compile_error now."""
    deep = untimed.evaluate(candidate("redteam14/deep_expression_crashes_host.py"))
    assert deep.status is Status.CORRECT, deep.message
    assert "static_checks_incomplete" in {w.code for w in deep.warnings}
    too_deep = untimed.evaluate(candidate("redteam14/uncompilable_depth_crashes_host.py"))
    assert too_deep.status is Status.COMPILE_ERROR and "cannot read the candidate" in too_deep.message
    assert cuda_sources(candidate("redteam14/uncompilable_depth_crashes_host.py")) == []  # the app shows it too


def test_static_checks_of_deep_code_are_a_finding_not_a_clean_bill():
    source = "def f(x):\n    return " + " + ".join(f"{i} * x" for i in range(600)) + "\n"
    assert [w.code for w in run_static_checks(source)] == ["static_checks_incomplete"]


def test_the_cpp_scan_is_linear_in_the_candidates_text():
    """quadratic_scan_*.py: `"at::" * 20000` in a built source took the C++ scan 99 s (the candidate's own load
    phase timed out, an honest ReLU got `timeout`), 240,000 repeats were projected at two hours of the host's time.
    A qualified call is matched from the head of its chain only, once."""
    started = time.perf_counter()
    assert cpp_torch_compute("#if 0\n" + "at::" * 240_000 + "\n#endif\n") == []
    assert time.perf_counter() - started < HOST_BOUND_S
    for text, found in {
        "at::relu(x)": ["at::relu"], "  ::at::mm<float>(a, b)": ["at::mm"], "foo::at::relu(x)": ["at::relu"],
        "c ? y :at::relu(x)": ["at::relu"], "at::cpu::clamp_min(x, 0)": ["at::cpu::clamp_min"],
        "torch::nn::functional::relu(x)": ["torch::nn::functional::relu"], "auto y = at::Tensor(x);": [],
    }.items():  # fmt: skip
        assert [f for f in cpp_torch_compute(text) if not f.startswith(".")] == found, text


def test_the_kernel_name_scan_is_linear_in_the_candidates_text():
    """The profile's coverage reads `__global__` kernels' names: `"__global__ " * 4000` took it 11 s."""
    started = time.perf_counter()
    assert GLOBAL_KERNEL.findall("__global__ " * 100_000) == []
    assert time.perf_counter() - started < HOST_BOUND_S
    source = "__global__ void relu_kernel(const float* x) {}\n__global__ static void k2(int n) {}"
    assert GLOBAL_KERNEL.findall(source) == ["relu_kernel", "k2"]
