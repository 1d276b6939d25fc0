"""Does a candidate compute on inputs rounded to fewer mantissa bits than float32 keeps?

The size of a candidate's error against float64 cannot tell a kernel that rounds its inputs a few bits short
(TF32-like or split tensor-core formats, or a deliberate cut) from an honest float32 kernel that sums in another
order: both can use 4-5x the float32 reference's share of the tolerance, under the ratio that makes a warning
(tests/candidates/redteam22/matmul256_inputs_cut_to_18_bits.py). Its shape can: an output computed on inputs
rounded to b bits lies far closer to the float64 result *on those rounded inputs* than to the exact one, while an
honest kernel's rounding errors are its own and lie no closer to any such result. So where a candidate's error is
notably larger than the reference's, the reference worker computes the problem in float64 on its inputs (and
parameters) rounded to each width in turn and reports a width whose result the candidate matches.

What it sees: every floating float32 input and parameter rounded alike, in each direction a conversion can round
(`ROUNDING_MODES`: to nearest and toward zero only, it matched no kernel rounding away from zero or toward an
infinity, tests/candidates/redteam24/). A kernel that rounds only some operands, scales blocks of values by a shared
exponent, or adds noise to its error, is not matched here (the README's "not prevented").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from kevin_tui.evaluator.protocol import ROUNDING_MODES
from kevin_tui.evaluator.worker.judge import rms_share

Rounding = Callable[[torch.Tensor], torch.Tensor]

# Probed only where the candidate's largest error is this many times the reference's own.
BAND = 1.5
# A width matches when the candidate's error against it is under this share of its error against the exact result
# (rounding both operands of a 256 matmul to 18 or 19 bits: 0.14-0.24; honest float32 kernels: 1.0 or more).
MATCH_SHARE = 0.5
WIDTHS = range(22, 9, -1)  # mantissa bits kept (float32 has 23; TF32 and float16 keep 10)
BUDGET_S = 5.0  # float64 runs of the problem, at most this long in all (a large problem probes fewer widths)


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


def rounded_match(
    rounded: Callable[[Rounding], Any], precise: Any, got: Any, dtype_of: Any, atol: float | None, rtol: float | None
) -> dict[str, float] | None:
    """The width (and mode) of input rounding whose float64 result the candidate's output `got` matches, with the
    ratio of its errors against that result and the exact one `precise`; None where none matches."""
    exact = rms_share(precise, got, dtype_of, atol, rtol)
    if not exact:
        return None
    best: dict[str, float] | None = None
    started = time.perf_counter()
    for bits in WIDTHS:
        for index, mode in enumerate(ROUNDING_MODES):
            if time.perf_counter() - started > BUDGET_S:
                return best
            out = rounded(mantissa_rounding(bits, mode))
            share = rms_share(out, got, dtype_of, atol, rtol)
            if share is None or share >= MATCH_SHARE * exact:
                continue
            if best is None or share / exact < best["rounding_match"]:
                best = {"rounded_bits": bits, "rounding_mode": float(index), "rounding_match": share / exact}
    return best
