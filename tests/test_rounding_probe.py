"""worker/rounding_probe.py on its own: which input rounding an output matches, on real float64 computations."""

from __future__ import annotations

import pytest
import torch

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
    assert mantissa_rounding(20, toward_zero=True)(x).tolist() == [1 + 2**-20, -(1 + 2**-20), 3.0]
    assert mantissa_rounding(19, toward_zero=False)(x).tolist() == [1 + 2**-19, -(1 + 2**-19), 3.0]
    assert mantissa_rounding(19, toward_zero=True)(x).tolist() == [1.0, -1.0, 3.0]
    halves = torch.tensor([1.5], dtype=torch.float16)
    assert mantissa_rounding(3, toward_zero=True)(halves) is halves  # only float32 is rounded


@pytest.mark.parametrize(("bits", "toward_zero"), [(20, False), (17, True), (10, False)])
def test_an_output_of_rounded_inputs_matches_that_rounding(operands, bits, toward_zero):
    a, b = operands
    rounding = mantissa_rounding(bits, toward_zero)
    found = _match(a, b, rounding(a) @ rounding(b))
    assert found is not None and found["rounded_bits"] == bits and found["toward_zero"] == float(toward_zero), found


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
