"""Red team 24: the rounded-inputs probe and the roundings it did not try, a problem changing its inputs in place
(its float64 results), and the C++ text scan under --strict (literals, trigraphs) (tests/candidates/redteam24/)."""

from __future__ import annotations

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host.candidate_run import _less_precise
from kevin_tui.evaluator.host.static_checks import cpp_torch_compute
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, PROBLEMS, RELU

HERE = CANDIDATES / "redteam24"
MATMUL = PROBLEMS / "matmul_256.py"


def _evaluate(problem, name: str, build_cache, **options):
    settings = EvalOptions(device="cpu", shapes="off", profile=False, cache_dir=build_cache, **options)
    with Evaluator(load_problem(problem), settings, prespawn=False) as evaluator:
        return evaluator.evaluate((HERE / f"{name}.py").read_text())


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("matmul256_inputs_cut_to_18_bits_away_from_zero", "rounded away from zero to 18 mantissa bits"),
        ("matmul256_inputs_cut_to_19_bits_toward_plus_infinity", "rounded toward +infinity to 19 mantissa bits"),
    ],
)
def test_inputs_rounded_in_another_direction_are_lower_precision(build_cache, name, named):
    """Inputs cut by a directed rounding (away from zero, toward +infinity) use ~5-6x the float32 reference's share
    of the tolerance, under the 10x ratio, and the probe tried rounding to nearest and toward zero only, which they
    match at no width: `correct` with no warning. Every direction a conversion can round in is tried now."""
    verdict = _evaluate(MATMUL, name, build_cache, timing=False)
    assert verdict.status is Status.CORRECT, verdict.message
    warnings = {w.code: w.message for w in verdict.warnings}
    assert named in warnings.get("lower_precision", ""), (warnings, verdict.evidence.get("precision"))


def test_inputs_in_a_block_floating_point_format_are_lower_precision(build_cache):
    """matmul256_block_scaled_19_bits.py: blocks of 32 values along K share one exponent, 19 fraction bits below the
    block's largest binade; ~6x the reference's share of the tolerance, and no per-value rounding matches it (a strict
    xfail until the probe searched each operand's rounding, block formats among them)."""
    verdict = _evaluate(MATMUL, "matmul256_block_scaled_19_bits", build_cache, timing=False)
    assert verdict.status is Status.CORRECT, verdict.message
    warnings = {w.code: w.message for w in verdict.warnings}
    assert "every 32 values along dimension 1 share one scale; 19 fraction bits" in warnings.get("lower_precision", ""), (
        warnings, verdict.evidence.get("precision"))  # fmt: skip


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("matmul256_scaled_input_cut_to_18_bits", "rounded to nearest to 18 mantissa bits"),
        ("honest_matmul256_scaled_input", None),
    ],
)
def test_a_problem_that_changes_its_inputs_keeps_its_trials_float64_results(build_cache, name, named):
    """On the CPU the reference's forward changed the very tensors kept as a trial's inputs, so the trial's float64
    result (precision evidence, the judge's fallback) was computed from inputs it had already changed: both errors
    against it were huge and alike, and an 18-bit cut got no warning. The reference runs on a copy now."""
    verdict = _evaluate(HERE / "problems" / "matmul256_scales_its_input.py", name, build_cache, timing=False)
    assert verdict.status is Status.CORRECT, verdict.message
    precision = verdict.evidence.get("precision") or {}
    warnings = {w.code: w.message for w in verdict.warnings}
    if named is None:
        assert "lower_precision" not in warnings and precision.get("candidate", 1) < 1, (warnings, precision)
    else:
        assert named in warnings.get("lower_precision", ""), (warnings, precision)


def test_an_op_named_in_a_message_is_no_pytorch_compute(build_cache):
    """honest_relu_cpp_naming_ops_in_messages.py: a plain C++ ReLU whose error messages name `torch.relu(x)` and
    `at::relu(x)` was rejected under --strict as PyTorch compute (the C++ scan read literals, and the module's Python
    strings, as code)."""
    verdict = _evaluate(RELU, "honest_relu_cpp_naming_ops_in_messages", build_cache, timing=False, strict=True)
    assert verdict.status is Status.CORRECT, verdict.message


def test_the_trigraph_flag_is_refused(build_cache):
    """relu_cpp_trigraph_paste.py: `-trigraphs` makes g++ read `??=??=` as the paste operator the text scan refuses
    as `##`, so the scan and the compiler read other texts; the flag is refused before anything is built."""
    verdict = _evaluate(RELU, "relu_cpp_trigraph_paste", build_cache, timing=False, strict=True)
    assert verdict.status is Status.COMPILE_ERROR, verdict.message
    assert "trigraph" in verdict.message, verdict.message


@pytest.mark.parametrize(
    "text",
    [
        'TORCH_CHECK(ok, "as torch.relu(x) would");',
        'const char* why = "at::relu(x)";',
        "auto c = 'x'; const char* why = R\"m(x.matmul(w))m\";",
    ],
)
def test_literals_name_no_compute_in_the_cpp_scan(text):
    assert cpp_torch_compute(text) == [], text


@pytest.mark.parametrize(
    "text",
    [
        'const char* s = "a"; auto y = at::relu(x); const char* t = "b";',
        "char q = '\"'; auto y = x.matmul(w);",
        "py::eval(\"__import__('torch').relu\")",
        'PyRun_SimpleString("import torch")',
        'auto unit = torch::jit::compile("def f(x):\\n    return torch.relu(x)");',
    ],
)
def test_code_between_literals_and_python_reached_from_a_literal_are_still_found(text):
    assert cpp_torch_compute(text), text


def test_the_measurement_kept_is_the_one_furthest_over_the_warnings_bar():
    """Of the two measurements (a secret trial, a secret timed call) the one with the larger error was kept, and the
    warning asked of it alone: a call 25x the reference's share (a warning) lost to one where the reference erred
    more too (6x, none), though both measured the same kernel."""
    narrow = {"candidate": 0.5, "reference": 0.02}
    noisier_call = {"candidate": 0.6, "reference": 0.1}
    assert _less_precise(narrow, noisier_call) and not _less_precise(noisier_call, narrow)
    matched = {"candidate": 0.3, "reference": 0.1, "rounded_bits": 18.0, "rounding_mode": 0.0, "rounding_match": 0.2}
    assert _less_precise(matched, narrow) and not _less_precise(narrow, matched)
