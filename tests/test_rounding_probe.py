"""worker/rounding_probe.py on its own: which input rounding an output matches, on real float64 computations."""

from __future__ import annotations

import pytest
import torch

from kevin_tui.evaluator.protocol import ROUNDING_MODES
from kevin_tui.evaluator.worker.rounding_probe import mantissa_rounding, rounded_match


@pytest.fixture(scope="module")
def operands() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return torch.randn(128, 128, generator=generator), torch.randn(128, 128, generator=generator)


def _match(a: torch.Tensor, b: torch.Tensor, got: torch.Tensor) -> dict[str, float] | None:
    precise = a.double() @ b.double()
    return rounded_match(lambda rounding: rounding(a).double() @ rounding(b).double(), precise, got, a @ b, None, None)


def test_rounding_keeps_the_asked_bits_and_rounds_in_the_asked_direction():
    x = torch.tensor([1 + 2**-20 + 2**-23, -(1 + 2**-20 + 2**-23), 3.0], dtype=torch.float32)
    assert mantissa_rounding(20, "toward zero")(x).tolist() == [1 + 2**-20, -(1 + 2**-20), 3.0]
    assert mantissa_rounding(19, "to nearest")(x).tolist() == [1 + 2**-19, -(1 + 2**-19), 3.0]
    assert mantissa_rounding(19, "toward zero")(x).tolist() == [1.0, -1.0, 3.0]
    assert mantissa_rounding(21, "away from zero")(x).tolist() == [1 + 2**-20 + 2**-21, -(1 + 2**-20 + 2**-21), 3.0]
    assert mantissa_rounding(21, "toward +infinity")(x).tolist() == [1 + 2**-20 + 2**-21, -(1 + 2**-20), 3.0]
    assert mantissa_rounding(21, "toward -infinity")(x).tolist() == [1 + 2**-20, -(1 + 2**-20 + 2**-21), 3.0]
    halves = torch.tensor([1.5], dtype=torch.float16)
    assert mantissa_rounding(3, "toward zero")(halves) is halves  # only float32 is rounded


@pytest.mark.parametrize(
    ("bits", "mode"),
    [(20, "to nearest"), (17, "toward zero"), (10, "to nearest"), (18, "away from zero"), (19, "toward +infinity"),
     (19, "toward -infinity")],
)  # fmt: skip
def test_an_output_of_rounded_inputs_matches_that_rounding(operands, bits, mode):
    a, b = operands
    rounding = mantissa_rounding(bits, mode)
    found = _match(a, b, rounding(a) @ rounding(b))
    assert found is not None and found["rounded_bits"] == bits, found
    assert ROUNDING_MODES[int(found["rounding_mode"])] == mode, found


def test_honest_float32_sums_in_any_order_match_no_rounding(operands):
    a, b = operands
    serial = torch.zeros(128, 128)
    for k in range(128):
        serial += a[:, k : k + 1] * b[k : k + 1, :]
    reversed_sum = torch.zeros(128, 128)
    for k in reversed(range(128)):
        reversed_sum += a[:, k : k + 1] * b[k : k + 1, :]
    for got in (a @ b, serial, reversed_sum):
        assert _match(a, b, got) is None
