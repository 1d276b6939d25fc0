"""worker/rounding_probe.py on its own: which input rounding an output matches, on real float64 computations."""

from __future__ import annotations

import time

import pytest
import torch

from kevin_tui.evaluator.protocol import ROUNDING_MODES
from kevin_tui.evaluator.worker.rounding_probe import block_rounding, mantissa_rounding, rounded_match


@pytest.fixture(scope="module")
def operands() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return torch.randn(128, 128, generator=generator), torch.randn(128, 128, generator=generator)


def _match(a: torch.Tensor, b: torch.Tensor, got: torch.Tensor) -> dict[str, float] | None:
    precise = a.double() @ b.double()
    operands = {"input 0": (tuple(a.shape), a.dtype), "input 1": (tuple(b.shape), b.dtype)}

    def rounded(plan):
        return plan("input 0", a).double() @ plan("input 1", b).double()

    return rounded_match(rounded, operands, precise, got, a @ b, None, None)


def test_rounding_keeps_the_asked_bits_and_rounds_in_the_asked_direction():
    x = torch.tensor([1 + 2**-20 + 2**-23, -(1 + 2**-20 + 2**-23), 3.0], dtype=torch.float32)
    assert mantissa_rounding(20, "toward zero")(x).tolist() == [1 + 2**-20, -(1 + 2**-20), 3.0]
    assert mantissa_rounding(19, "to nearest")(x).tolist() == [1 + 2**-19, -(1 + 2**-19), 3.0]
    assert mantissa_rounding(19, "toward zero")(x).tolist() == [1.0, -1.0, 3.0]
    assert mantissa_rounding(21, "away from zero")(x).tolist() == [1 + 2**-20 + 2**-21, -(1 + 2**-20 + 2**-21), 3.0]
    assert mantissa_rounding(21, "toward +infinity")(x).tolist() == [1 + 2**-20 + 2**-21, -(1 + 2**-20), 3.0]
    assert mantissa_rounding(21, "toward -infinity")(x).tolist() == [1 + 2**-20, -(1 + 2**-20 + 2**-21), 3.0]
    wide = torch.tensor([1 + 2**-20], dtype=torch.float64)
    assert mantissa_rounding(3, "toward zero")(wide) is wide  # float64 is not rounded


def test_16_bit_floats_are_rounded_below_their_own_width_and_ties_go_to_even():
    """A bf16 or float16 operand a bit or two short ties on a quarter to a half of its values: "to nearest" sends
    them to the even neighbour, as a conversion does (half up matched no kernel converting float16 through bf16)."""
    halves = torch.randn(4096, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    assert torch.equal(mantissa_rounding(7, "to nearest")(halves), halves.to(torch.bfloat16).to(torch.float16))
    brains = torch.tensor([1 + 2**-7, 1 + 3 * 2**-7, -(1 + 2**-7)], dtype=torch.bfloat16)  # ties at 6 bits
    assert mantissa_rounding(6, "to nearest")(brains).tolist() == [1.0, 1 + 4 * 2**-7, -1.0]
    assert mantissa_rounding(7, "toward zero")(brains) is brains  # bf16 keeps 7: nothing to cut
    assert mantissa_rounding(12, "toward zero")(halves) is halves  # widths are each format's own


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


def test_a_block_format_shares_the_largest_binade_of_each_block():
    x = torch.tensor([[4.0 + 2**-3, 1 + 2**-5, -(2**-7), 0.0], [2**-30, 2**-31 + 2**-40, 0.0, 0.0]])
    by_rows = block_rounding(3, 4, 1, "to nearest")(x)  # blocks of four along each row; 3 bits below the largest
    assert by_rows.tolist() == [[4.0, 1.0, 0.0, 0.0], [2**-30, 2**-31, 0.0, 0.0]]
    in_pairs = block_rounding(3, 2, 1, "to nearest")(x)  # -2**-7 is the largest of its own block: kept
    assert in_pairs[0].tolist() == [4.0, 1.0, -(2**-7), 0.0]
    toward_zero = block_rounding(4, 4, 1, "toward zero")(torch.tensor([[-1.99, 0.99, 0.2, 0.01]]))
    assert toward_zero.tolist() == [[-1.9375, 0.9375, 0.1875, 0.0]]  # steps of 2**-4: the largest is 1.x
    by_columns = block_rounding(3, 2, 0, "to nearest")(x)  # a column's two values share a scale
    assert by_columns[1, 0] == 0.0 and by_columns[0, 0] == 4.0
    assert block_rounding(3, 2, 1, "to nearest")(torch.tensor([1.5], dtype=torch.float16)).dtype == torch.float16


@pytest.mark.parametrize(("bits", "block"), [(19, 32), (17, 16)])
def test_an_output_of_inputs_in_a_block_format_matches_that_format(operands, bits, block):
    """A along its rows (dimension 1) and B along its columns (dimension 0): each along the sum's dimension, as a
    block-scaled matmul stores them; no rounding of every operand alike matches it."""
    a, b = operands
    got = block_rounding(bits, block, 1, "to nearest")(a) @ block_rounding(bits, block, 0, "to nearest")(b)
    found = _match(a, b, got)
    assert found is not None and found["rounded_bits"] == bits and found["rounded_block"] == block, found
    assert found["rounded_operands"] == 2 and found["rounding_match"] < 0.5, found


def test_a_kernel_rounding_one_operand_only_matches_that_operands_rounding(operands):
    a, b = operands
    found = _match(a, b, a @ mantissa_rounding(16, "toward zero")(b))
    assert found is not None and found["rounded_bits"] == 16 and found["rounded_block"] == 0, found
    assert (found["rounded_operands"], found["operands"]) == (1, 2), found


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_operands_cut_short_match_and_honest_16_bit_products_do_not(dtype):
    """tests/candidates/redteam27/: the probe rounded float32 operands only, so a bf16 or float16 kernel cutting an
    operand short was never named (and for bf16 the 10x ratio cannot fire). An honest product rounded at each step
    in another order matches nothing."""
    generator = torch.Generator().manual_seed(5)
    a, b, c = (torch.randn(128, 256, generator=generator).to(dtype) for _ in range(3))
    operands = {f"input {i}": ((128, 256), dtype) for i in range(3)}
    precise = a.double() * b.double() * c.double()

    def rounded(plan):
        return plan("input 0", a).double() * plan("input 1", b).double() * plan("input 2", c).double()

    bits = 6 if dtype == torch.bfloat16 else 8
    cut = (a.float() * b.float() * mantissa_rounding(bits, "to nearest")(c).float()).to(dtype)
    found = rounded_match(rounded, operands, precise, cut, a * (b * c), None, None)
    assert found and found["rounded_bits"] == bits and found["format_bits"] == (7 if dtype == torch.bfloat16 else 10)
    honest = ((a.float() * b.float()).to(dtype).float() * c.float()).to(dtype)
    assert rounded_match(rounded, operands, precise, honest, a * (b * c), None, None) is None


def test_the_probe_of_an_honest_kernel_keeps_to_its_budget(operands, monkeypatch):
    """Every rounding tried on a kernel that matches none: the search stops at its budget of CPU time (so how far
    it gets does not depend on the machine's load), or at its cap of wall-clock time, whatever is left."""
    from kevin_tui.evaluator.worker import rounding_probe

    a, b = operands
    serial = torch.zeros(128, 128)
    for k in range(128):
        serial += a[:, k : k + 1] * b[k : k + 1, :]
    monkeypatch.setattr(rounding_probe, "BUDGET_S", 0.3)
    started = time.process_time()
    assert _match(a, b, serial) is None
    assert time.process_time() - started < 0.3 + 0.5
    monkeypatch.setattr(rounding_probe, "BUDGET_S", 600.0)
    monkeypatch.setattr(rounding_probe, "WALL_S", 0.3)
    started = time.perf_counter()
    assert _match(a, b, serial) is None
    assert time.perf_counter() - started < 0.3 + 0.5
