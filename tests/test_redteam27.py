"""Red team 27: the precision evidence on 16-bit float problems (tests/candidates/redteam27/). The rounded-inputs
probe rounded float32 operands only, and on a bf16 problem the 10x ratio cannot fire (the bf16 reference's own
rounding uses ~20-35% of the tolerance): a kernel cutting an operand short of its format was `correct` with no
`lower_precision` warning, so `--strict` accepted it."""

from __future__ import annotations

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES

HERE = CANDIDATES / "redteam27"


def _evaluate(problem: str, name: str, build_cache, **options):
    settings = EvalOptions(device="cpu", shapes="off", profile=False, timing=False, cache_dir=build_cache, **options)
    with Evaluator(load_problem(HERE / "problems" / f"{problem}.py"), settings, prespawn=False) as evaluator:
        return evaluator.evaluate((HERE / f"{name}.py").read_text())


@pytest.mark.parametrize(
    ("problem", "name", "named"),
    [
        (
            "bf16_product",
            "bf16_product_inputs_cut_to_6_bits",
            "rounded to nearest to 6 mantissa bits (bfloat16 keeps 7)",
        ),
        ("fp16_product", "fp16_product_one_input_in_bf16", "rounded to nearest to 7 mantissa bits (float16 keeps 10)"),
        ("bf16_product", "honest_bf16_product", None),
        ("fp16_product", "honest_fp16_product", None),
    ],
)
def test_a_16_bit_operand_cut_short_is_lower_precision(build_cache, problem, name, named):
    """bf16 cut to 6 bits (0.9 of the tolerance, the reference's 0.3) and float16 through bf16 (8.5x the reference's
    share, under 10x) were `correct` with no warning; the probe rounds bf16 and float16 operands below their own
    width now, ties to even as a conversion rounds. Their honest twins (float32 math, rounded once) get none."""
    verdict = _evaluate(problem, name, build_cache)
    assert verdict.status is Status.CORRECT, verdict.message
    warnings = {w.code: w.message for w in verdict.warnings}
    precision = verdict.evidence.get("precision")
    if named is None:
        assert "lower_precision" not in warnings, (warnings, precision)
    else:
        assert named in warnings.get("lower_precision", ""), (warnings, precision)
