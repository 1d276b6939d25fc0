"""Does a candidate compute on inputs rounded to fewer mantissa bits than float32 keeps?

The size of a candidate's error against float64 cannot tell a kernel that rounds its inputs a few bits short
(TF32-like or split tensor-core formats, block floating-point formats, or a deliberate cut) from an honest float32
kernel that sums in another order: both can use 4-6x the float32 reference's share of the tolerance, under the
ratio that makes a warning (tests/candidates/redteam22/matmul256_inputs_cut_to_18_bits.py,
tests/candidates/redteam24/matmul256_block_scaled_19_bits.py). Its shape can: an output computed on inputs rounded
to b bits lies far closer to the float64 result *on those rounded inputs* than to the exact one, while an honest
kernel's rounding errors are its own and lie no closer to any such result. So where a candidate's error is notably
larger than the reference's, the reference worker computes the problem in float64 on its operands (inputs and
parameters) rounded in one way after another and reports a rounding whose result the candidate matches. The
16-bit float formats are probed too, a few bits short of their own width: there the size of the error cannot tell at
all (a bfloat16 reference's own rounding uses ~20-35% of bf16's tolerance, so 10x its share is outside it), and a
bf16 operand cut to 6 bits, or a float16 one taken through bf16, was `correct` with no warning
(tests/candidates/redteam27/).

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
from kevin_tui.evaluator.worker.judge import rms_share, sampled

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
# The formats probed: the mantissa bits each keeps, and the fewest it is rounded to (TF32 and float16 keep 10; the
# 8-bit float formats 3 and 2).
FORMATS = {torch.float32: (23, 10), torch.bfloat16: (7, 2), torch.float16: (10, 2)}
BLOCKS = (16, 32)  # values sharing one scale in the block formats tried (NVFP4's and the MX formats' blocks)
BLOCK_MODES = ("to nearest", "toward zero")
SAMPLE = 1 << 16  # values of each output the errors are measured on (judge.sampled)
# The float64 runs of the problem stop after this much of the reference worker's CPU time (all its threads) in all: a
# large problem probes fewer roundings, but how many does not depend on what else the machine runs (by the wall
# clock, a 128 matmul on a loaded CI machine got through too few to reach a block format's); and after WALL_S of the
# wall clock, whatever is left.
BUDGET_S = 5.0
WALL_S = 30.0


# What each direction adds to a magnitude's bits before the cut, on positive and on negative values: half the cut
# (to nearest; less one where the kept bits are even, so a tie goes to the even neighbour, as a conversion rounds: a
# 16-bit operand cut by a bit or two ties on a quarter to a half of its values), nothing (truncation, toward zero)
# or all but one of it (away from zero).
CARRIES = {
    "to nearest": ("half", "half"), "toward zero": ("none", "none"), "away from zero": ("all", "all"),
    "toward +infinity": ("all", "none"), "toward -infinity": ("none", "all"),
}  # fmt: skip


def widths(dtype: torch.dtype) -> range:
    """The mantissa widths an operand of `dtype` is rounded to, widest first (none for a format not probed)."""
    kept, fewest = FORMATS.get(dtype, (0, 0))
    return range(kept - 1, fewest - 1, -1)


def mantissa_rounding(bits: int, mode: str) -> Rounding:
    """Round tensors of a probed format wider than `bits` to `bits` explicit mantissa bits (others unchanged) in
    direction `mode` (one of `ROUNDING_MODES`), as a narrower format does; on the bits of sign and magnitude of the
    value as float32, which holds every 16-bit float exactly."""
    shift = 23 - bits
    sizes = {"half": 1 << (shift - 1), "none": 0, "all": (1 << shift) - 1}
    positive, negative = (sizes[carry] for carry in CARRIES[mode])

    def rounded(t: torch.Tensor) -> torch.Tensor:
        if bits not in widths(t.dtype):
            return t
        i = t.to(torch.float32).contiguous().view(torch.int32)
        carry = (i >= 0).to(torch.int32) * (positive - negative) + negative if positive != negative else positive
        if mode == "to nearest":
            carry = carry - 1 + ((i >> shift) & 1)
        return (((i + carry) >> shift) << shift).view(torch.float32).to(t.dtype)

    return rounded


def block_rounding(bits: int, block: int, dim: int, mode: str) -> Rounding:
    """Round tensors of a probed format as a block floating-point format stores them: every
    `block` values along `dim` share one power-of-two scale, and each keeps `bits` fraction bits below its block's
    largest binade (so a block's smaller values keep fewer), rounded to nearest (ties to even) or toward zero."""
    integral = torch.round if mode == "to nearest" else torch.trunc

    def rounded(t: torch.Tensor) -> torch.Tensor:
        if t.dtype not in FORMATS or t.dim() <= dim:
            return t
        x = t.movedim(dim, -1).double()
        size = x.shape[-1]
        blocks = torch.nn.functional.pad(x, (0, -size % block)).unflatten(-1, (-1, block))
        _, exponent = torch.frexp(blocks.abs().amax(-1, keepdim=True))  # largest = m * 2**exponent, m in [0.5, 1)
        scale = torch.ldexp(torch.ones_like(blocks[..., :1]), exponent - 1 - bits)
        out = (integral(blocks / scale) * scale).flatten(-2)[..., :size]
        return out.movedim(-1, dim).to(t.dtype)

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


def per_value_cuts(dtypes: set[torch.dtype]) -> Iterator[Cut]:
    """Each value rounded by its own exponent, to every width any of `dtypes` is rounded to (a cut leaves operands
    of a format as narrow or narrower alone)."""
    every = sorted({bits for dtype in dtypes for bits in widths(dtype)}, reverse=True)
    return (Cut(bits, mode) for bits in every for mode in ROUNDING_MODES)


def cuts_for(shape: tuple[int, ...], dtype: torch.dtype) -> Iterator[Cut]:
    """Every rounding the search tries on an operand of `shape` and `dtype`: per value, then blocks along each
    dimension longer than one value."""
    yield from per_value_cuts({dtype})
    for dim, size in enumerate(shape):
        if size > 1:
            yield from (Cut(b, m, block, dim) for block in BLOCKS for b in widths(dtype) for m in BLOCK_MODES)


def rounded_match(
    rounded: Callable[[Plan], Any],
    operands: dict[str, tuple[tuple[int, ...], torch.dtype]],
    precise: Any,
    got: Any,
    dtype_of: Any,
    atol: float | None,
    rtol: float | None,
) -> dict[str, float] | None:
    """The rounding of the `operands` (name: shape and dtype, each of a probed format) whose float64 result
    (`rounded(plan)`) the candidate's output `got` matches, with the ratio of its errors against that result and the
    exact one `precise`, how many operands it rounds and of how many, and the mantissa bits of the rounded format;
    None where none matches."""
    threads = torch.get_num_threads()
    # one thread: the budget counts every thread's CPU time, so more threads run no more roundings in it, and on a
    # loaded machine their synchronisation cost most of it (a 128 matmul's search stopped short in CI)
    torch.set_num_threads(1)
    try:
        return _search(rounded, operands, precise, got, dtype_of, atol, rtol)
    finally:
        torch.set_num_threads(threads)


def _search(
    rounded: Callable[[Plan], Any],
    operands: dict[str, tuple[tuple[int, ...], torch.dtype]],
    precise: Any,
    got: Any,
    dtype_of: Any,
    atol: float | None,
    rtol: float | None,
) -> dict[str, float] | None:
    got, dtype_of = sampled(got, SAMPLE), sampled(dtype_of, SAMPLE)
    exact = rms_share(sampled(precise, SAMPLE), got, dtype_of, atol, rtol)
    if not exact or not operands:
        return None
    spent = time.process_time() + BUDGET_S, time.perf_counter() + WALL_S

    def out_of_time() -> bool:
        return time.process_time() > spent[0] or time.perf_counter() > spent[1]

    def share(plan: dict[str, Rounding]) -> float:
        out = rounded(lambda name, t: plan[name](t) if name in plan else t)
        found = rms_share(sampled(out, SAMPLE), got, dtype_of, atol, rtol)
        return float("inf") if found is None else found

    best: tuple[float, Cut] | None = None
    dtypes = {dtype for _, dtype in operands.values()}
    for cut in per_value_cuts(dtypes):  # every operand alike
        if out_of_time():
            break
        if (found := share(dict.fromkeys(operands, cut.rounding()))) < (best[0] if best else MATCH_SHARE * exact):
            best = (found, cut)
    if best is not None:
        rounded_alike = [dtype for dtype in dtypes if best[1].bits in widths(dtype)]
        return _match(best[1], best[0] / exact, len(operands), len(operands), max(map(_kept, rounded_alike)))
    chosen: dict[str, Rounding] = {}
    closest, first = exact, None
    for name, (shape, dtype) in sorted(operands.items(), key=lambda item: -math.prod(item[1][0])):  # largest first
        pick: tuple[float, Cut] | None = None
        for cut in cuts_for(shape, dtype):
            if out_of_time():
                break
            if (found := share({**chosen, name: cut.rounding()})) < (pick[0] if pick else KEEP_SHARE * closest):
                pick = (found, cut)
        if pick is not None:
            closest, chosen[name], first = pick[0], pick[1].rounding(), first or (pick[1], _kept(dtype))
    if first is None or closest >= MATCH_SHARE * exact:
        return None
    return _match(first[0], closest / exact, len(chosen), len(operands), first[1])


def _kept(dtype: torch.dtype) -> int:
    return FORMATS[dtype][0]


def _match(cut: Cut, ratio: float, rounded: int, operands: int, kept: int) -> dict[str, float]:
    return {**cut.evidence(), "rounding_match": ratio, "rounded_operands": float(rounded), "operands": float(operands),
            "format_bits": float(kept)}  # fmt: skip
