"""Does a candidate compute on inputs rounded to fewer mantissa bits than float32 keeps?

The size of a candidate's error against float64 cannot tell a kernel that rounds its inputs a few bits short
(TF32-like or split tensor-core formats, or a deliberate cut) from an honest float32 kernel that sums in another
order: both can use 4-5x the float32 reference's share of the tolerance, under the ratio that makes a warning
(tests/candidates/redteam22/matmul256_inputs_cut_to_18_bits.py). Its shape can: an output computed on inputs
rounded to b bits lies far closer to the float64 result *on those rounded inputs* than to the exact one, while an
honest kernel's rounding errors are its own and lie no closer to any such result. So where a candidate's error is
notably larger than the reference's, the reference worker computes the problem in float64 on its inputs (and
parameters) rounded to each width in turn and reports a width whose result the candidate matches.

What it sees: every floating float32 input and parameter rounded alike, to nearest or toward zero. A kernel that
rounds only some operands, or adds noise to its error, is not matched here (the README's "not prevented").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from kevin_tui.evaluator.worker.judge import rms_share

Rounding = Callable[[torch.Tensor], torch.Tensor]

# Probed only where the candidate's largest error is this many times the reference's own.
BAND = 1.5
# A width matches when the candidate's error against it is under this share of its error against the exact result
# (rounding both operands of a 256 matmul to 18 or 19 bits: 0.14-0.24; honest float32 kernels: 1.0 or more).
MATCH_SHARE = 0.5
WIDTHS = range(22, 9, -1)  # mantissa bits kept (float32 has 23; TF32 and float16 keep 10)
BUDGET_S = 5.0  # float64 runs of the problem, at most this long in all (a large problem probes fewer widths)


def mantissa_rounding(bits: int, toward_zero: bool) -> Rounding:
    """Round float32 tensors to `bits` explicit mantissa bits (others unchanged), as a narrower format does."""
    shift = 23 - bits
    half = 0 if toward_zero else 1 << (shift - 1)

    def rounded(t: torch.Tensor) -> torch.Tensor:
        if t.dtype != torch.float32:
            return t
        i = t.contiguous().view(torch.int32)
        return (((i + half) >> shift) << shift).view(torch.float32)

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
        for toward_zero in (False, True):
            if time.perf_counter() - started > BUDGET_S:
                return best
            out = rounded(mantissa_rounding(bits, toward_zero))
            share = rms_share(out, got, dtype_of, atol, rtol)
            if share is None or share >= MATCH_SHARE * exact:
                continue
            if best is None or share / exact < best["rounding_match"]:
                best = {"rounded_bits": bits, "toward_zero": float(toward_zero), "rounding_match": share / exact}
    return best
