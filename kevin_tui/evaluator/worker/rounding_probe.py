"""Does a candidate compute on inputs rounded to fewer mantissa bits than float32 keeps?

The size of a candidate's error against float64 cannot tell a kernel that rounds its inputs a few bits short
(TF32-like or split tensor-core formats, block floating-point formats, or a deliberate cut) from an honest float32
kernel that sums in another order: both can use 4-6x the float32 reference's share of the tolerance, under the
ratio that makes a warning (tests/candidates/redteam22/matmul256_inputs_cut_to_18_bits.py,
tests/candidates/redteam24/matmul256_block_scaled_19_bits.py). Its shape can: an output computed on inputs rounded
to b bits lies far closer to the float64 result *on those rounded inputs* than to the exact one, while an honest
kernel's rounding errors are its own and lie no closer to any such result. So where a candidate's error is notably
larger than the reference's, the reference worker computes the problem in float64 on its operands (inputs and
parameters) rounded in one way after another and reports a rounding whose result the candidate matches.

What it tries, within a time budget: first every float32 operand rounded alike, each value to each width in each
direction a conversion can round (`ROUNDING_MODES`: to nearest and toward zero only, it matched no kernel rounding
away from zero or toward an infinity, tests/candidates/redteam24/); then, where none matched, each operand on its
own, largest first, keeping for each the rounding that brings the candidate's output closest (none, each value by
its own exponent, or a block format: every 16 or 32 values along one dimension sharing their largest binade, to
nearest or toward zero), so that a kernel rounding only some operands, or each in a format of its own, is matched
too. A kernel that adds noise to its error, or rounds in a way none of these models, is not matched here (the
README's "not prevented").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from kevin_tui.evaluator.protocol import ROUNDING_MODES
from kevin_tui.evaluator.worker.judge import rms_share

Rounding = Callable[[torch.Tensor], torch.Tensor]
# How each operand is rounded for one float64 run: its name ("input 0", or a parameter's or buffer's) and value in,
# the value to compute on out.
Plan = Callable[[str, torch.Tensor], torch.Tensor]

# Probed only where the candidate's largest error is this many times the reference's own.
BAND = 1.5
# A rounding matches when the candidate's error against it is under this share of its error against the exact
# result (rounding both operands of a 256 matmul to 18 or 19 bits: 0.14-0.24; honest float32 kernels: 1.0 or more).
MATCH_SHARE = 0.5
# One operand's rounding is kept in the search when it brings the candidate's output at least this much closer.
KEEP_SHARE = 0.95
WIDTHS = range(22, 9, -1)  # mantissa bits kept (float32 has 23; TF32 and float16 keep 10)
BLOCKS = (16, 32)  # values sharing one scale in the block formats tried (NVFP4's and the MX formats' blocks)
BLOCK_MODES = ("to nearest", "toward zero")
BUDGET_S = 5.0  # float64 runs of the problem, at most this long in all (a large problem probes fewer roundings)


# What each direction adds to a magnitude's bits before the cut, on positive and on negative values: half the cut
# (to nearest), nothing (truncation, toward zero) or all but one of it (away from zero).
CARRIES = {
    "to nearest": ("half", "half"), "toward zero": ("none", "none"), "away from zero": ("all", "all"),
    "toward +infinity": ("all", "none"), "toward -infinity": ("none", "all"),
}  # fmt: skip


def mantissa_rounding(bits: int, mode: str) -> Rounding:
    """Round float32 tensors to `bits` explicit mantissa bits (others unchanged) in direction `mode` (one of
    `ROUNDING_MODES`), as a narrower format does; on the bits of sign and magnitude."""
    shift = 23 - bits
    sizes = {"half": 1 << (shift - 1), "none": 0, "all": (1 << shift) - 1}
    positive, negative = (sizes[carry] for carry in CARRIES[mode])

    def rounded(t: torch.Tensor) -> torch.Tensor:
        if t.dtype != torch.float32:
            return t
        i = t.contiguous().view(torch.int32)
        carry = (i >= 0).to(torch.int32) * (positive - negative) + negative if positive != negative else positive
        return (((i + carry) >> shift) << shift).view(torch.float32)

    return rounded


def block_rounding(bits: int, block: int, dim: int, mode: str) -> Rounding:
    """Round float32 tensors as a block floating-point format stores them: every `block` values along `dim` share
    one power-of-two scale, and each keeps `bits` fraction bits below its block's largest binade (so a block's
    smaller values keep fewer), rounded to nearest (ties to even) or toward zero."""
    integral = torch.round if mode == "to nearest" else torch.trunc

    def rounded(t: torch.Tensor) -> torch.Tensor:
        if t.dtype != torch.float32 or t.dim() <= dim:
            return t
        x = t.movedim(dim, -1).double()
        size = x.shape[-1]
        blocks = torch.nn.functional.pad(x, (0, -size % block)).unflatten(-1, (-1, block))
        _, exponent = torch.frexp(blocks.abs().amax(-1, keepdim=True))  # largest = m * 2**exponent, m in [0.5, 1)
        scale = torch.ldexp(torch.ones_like(blocks[..., :1]), exponent - 1 - bits)
        out = (integral(blocks / scale) * scale).flatten(-2)[..., :size]
        return out.movedim(-1, dim).to(torch.float32)

    return rounded


@dataclass(frozen=True)
class Cut:
    """One rounding of one operand (or of all alike): `block` 0 rounds each value by its own exponent."""

    bits: int
    mode: str
    block: int = 0
    dim: int = 0

    def rounding(self) -> Rounding:
        if self.block:
            return block_rounding(self.bits, self.block, self.dim, self.mode)
        return mantissa_rounding(self.bits, self.mode)

    def evidence(self) -> dict[str, float]:
        """As a precision event carries it (numbers only; the mode by its index in `ROUNDING_MODES`)."""
        return {"rounded_bits": float(self.bits), "rounding_mode": float(ROUNDING_MODES.index(self.mode)),
                "rounded_block": float(self.block), "rounded_dim": float(self.dim)}  # fmt: skip


def per_value_cuts() -> Iterator[Cut]:
    return (Cut(bits, mode) for bits in WIDTHS for mode in ROUNDING_MODES)


def cuts_for(shape: tuple[int, ...]) -> Iterator[Cut]:
    """Every rounding the search tries on an operand of `shape`: per value, then blocks along each dimension longer
    than one value."""
    yield from per_value_cuts()
    for dim, size in enumerate(shape):
        if size > 1:
            yield from (Cut(b, m, block, dim) for block in BLOCKS for b in WIDTHS for m in BLOCK_MODES)


def rounded_match(
    rounded: Callable[[Plan], Any],
    operands: dict[str, tuple[int, ...]],
    precise: Any,
    got: Any,
    dtype_of: Any,
    atol: float | None,
    rtol: float | None,
) -> dict[str, float] | None:
    """The rounding of the float32 `operands` (name: shape) whose float64 result (`rounded(plan)`) the candidate's
    output `got` matches, with the ratio of its errors against that result and the exact one `precise`, how many
    operands it rounds and of how many; None where none matches."""
    exact = rms_share(precise, got, dtype_of, atol, rtol)
    if not exact or not operands:
        return None
    deadline = time.perf_counter() + BUDGET_S

    def share(plan: dict[str, Rounding]) -> float:
        out = rounded(lambda name, t: plan[name](t) if name in plan else t)
        found = rms_share(out, got, dtype_of, atol, rtol)
        return float("inf") if found is None else found

    best: tuple[float, Cut] | None = None
    for cut in per_value_cuts():  # every operand alike
        if time.perf_counter() > deadline:
            break
        if (found := share(dict.fromkeys(operands, cut.rounding()))) < (best[0] if best else MATCH_SHARE * exact):
            best = (found, cut)
    if best is not None:
        return _match(best[1], best[0] / exact, len(operands), len(operands))
    chosen: dict[str, Rounding] = {}
    closest, first = exact, None
    for name, shape in sorted(operands.items(), key=lambda item: -math.prod(item[1])):  # largest first
        pick: tuple[float, Cut] | None = None
        for cut in cuts_for(shape):
            if time.perf_counter() > deadline:
                break
            if (found := share({**chosen, name: cut.rounding()})) < (pick[0] if pick else KEEP_SHARE * closest):
                pick = (found, cut)
        if pick is not None:
            closest, chosen[name], first = pick[0], pick[1].rounding(), first or pick[1]
    if first is None or closest >= MATCH_SHARE * exact:
        return None
    return _match(first, closest / exact, len(chosen), len(operands))


def _match(cut: Cut, ratio: float, rounded: int, operands: int) -> dict[str, float]:
    return {**cut.evidence(), "rounding_match": ratio, "rounded_operands": float(rounded), "operands": float(operands)}
