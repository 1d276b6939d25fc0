"""Comparing candidate outputs with reference outputs (runs in the reference worker).

The reference worker never imports the candidate, so nothing the candidate
does can change how it is judged. The tolerance is made meaningful: the
absolute tolerance never exceeds `rtol` times the largest reference value, so
a candidate that returns zeros cannot pass a problem whose outputs are all tiny.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from kevin_tui.evaluator.verdict import Check

TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
}


@dataclass
class Leaf:
    """One tensor (or plain value) of an output, as the candidate worker recorded it."""

    type_name: str
    value: Any
    device: str | None = None


@dataclass
class Judgement:
    passed: bool
    checks: list[Check] = field(default_factory=list)
    mismatch: dict[str, Any] = field(default_factory=dict)
    message: str = ""


def tolerance_for(dtype: torch.dtype, atol: float | None, rtol: float | None) -> tuple[float, float]:
    default = TOLERANCES.get(dtype, (0.0, 0.0))
    return (default[0] if atol is None else atol, default[1] if rtol is None else rtol)


def flatten(output: Any) -> list[Any]:
    if isinstance(output, tuple | list):
        return [leaf for item in output for leaf in flatten(item)]
    return [output]


def compare_tensor(ref: torch.Tensor, out: torch.Tensor, atol: float | None, rtol: float | None) -> dict | None:
    """None when `out` matches `ref`; otherwise the mismatch figures."""
    if out.shape != ref.shape:
        return {"reason": f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}"}
    if out.dtype != ref.dtype:
        return {"reason": f"dtype {out.dtype}, expected {ref.dtype}"}
    if not ref.is_floating_point() and not ref.is_complex():
        if torch.equal(out, ref):
            return None
        wrong = int((out != ref).sum())
        return {"reason": f"{wrong} of {ref.numel()} values differ (exact match required for {ref.dtype})"}
    a, r = out.double(), ref.double()
    ref_finite, out_finite = torch.isfinite(r), torch.isfinite(a)
    bad_nonfinite = ref_finite & ~out_finite
    if bool(bad_nonfinite.any()):
        return {"reason": f"{int(bad_nonfinite.sum())} NaN/Inf values where the reference has finite ones"}
    r_nf, a_nf = r[~ref_finite], a[~ref_finite]
    same_nan = torch.equal(torch.isnan(r_nf), torch.isnan(a_nf))
    if not same_nan or not torch.equal(r_nf[~torch.isnan(r_nf)], a_nf[~torch.isnan(r_nf)]):
        return {"reason": "NaN/Inf values differ from the reference's"}
    atol_, rtol_ = tolerance_for(ref.dtype, atol, rtol)
    if ref.numel() == 0:
        return None
    r_f, a_f = r[ref_finite], a[ref_finite]
    scale = float(r_f.abs().max()) if r_f.numel() else 0.0
    effective_atol = min(atol_, rtol_ * scale)
    diff = (a_f - r_f).abs()
    allowed = effective_atol + rtol_ * r_f.abs()
    over = diff > allowed
    if r_f.numel() > 1 and float(r_f.max()) != float(r_f.min()) and float(a_f.max()) == float(a_f.min()):
        reason = f"constant output {float(a_f.flatten()[0]):.6g} where the reference varies"
    elif bool(over.any()):
        reason = f"{int(over.sum())} of {r_f.numel()} values outside tolerance"
    else:
        return None
    return {"reason": reason, **_figures(r, a, diff, over, effective_atol, rtol_, ref_finite)}


def _figures(r, a, diff, over, atol, rtol, finite_mask) -> dict[str, Any]:
    worst_flat = int(diff.argmax())
    positions = finite_mask.flatten().nonzero().flatten()
    worst_index = tuple(int(i) for i in torch.unravel_index(positions[worst_flat], r.shape)) if r.dim() else ()
    rel = diff / r[finite_mask].abs().clamp_min(1e-12)
    return {
        "max_abs_error": float(diff.max()),
        "max_rel_error": float(rel.max()),
        "mismatched": int(over.sum()),
        "total": int(diff.numel()),
        "worst_index": list(worst_index),
        "expected": float(r[worst_index]) if worst_index or r.dim() == 0 else None,
        "got": float(a[worst_index]) if worst_index or a.dim() == 0 else None,
        "atol": atol,
        "rtol": rtol,
    }


def compare_output(
    ref: Any, leaves: list[Leaf], ref_device: str, atol: float | None, rtol: float | None
) -> dict | None:
    ref_leaves = flatten(ref)
    if len(ref_leaves) != len(leaves):
        return {"reason": f"{len(leaves)} outputs, expected {len(ref_leaves)}"}
    for index, (expected, got) in enumerate(zip(ref_leaves, leaves, strict=True)):
        where = f"output {index}: " if len(ref_leaves) > 1 else ""
        if not isinstance(expected, torch.Tensor):
            if got.value != expected:
                return {"reason": f"{where}{got.value!r}, expected {expected!r}"}
            continue
        if got.type_name != "torch.Tensor":
            return {"reason": f"{where}returned a {got.type_name}, not a plain torch.Tensor"}
        if got.device != ref_device:
            return {"reason": f"{where}tensor on {got.device}, expected {ref_device}"}
        problem = compare_tensor(expected, got.value, atol, rtol)
        if problem:
            problem["reason"] = where + problem["reason"]
            return problem
    return None


def judge(
    references: list[Any],
    candidate: list[dict[str, list[Leaf]]],
    ref_device: str,
    atol: float | None = None,
    rtol: float | None = None,
) -> Judgement:
    """`candidate[t]` holds the outputs of trial t, run 'before' and 'after' the reference."""
    checks: list[Check] = []
    for trial, (ref, runs) in enumerate(zip(references, candidate, strict=True)):
        for order in ("before", "after"):
            problem = compare_output(ref, runs[order], ref_device, atol, rtol)
            name = f"trial {trial + 1} ({order} the reference)"
            if problem is None:
                checks.append(Check(f"output {name}", True))
                continue
            if trial > 0 and _repeats_previous(candidate[trial - 1][order], runs[order]):
                problem["reason"] += "; identical to the previous call's output (a cached answer?)"
            checks.append(Check(f"output {name}", False, problem["reason"]))
            problem["trial"] = trial + 1
            problem["order"] = order
            return Judgement(False, checks, problem, f"wrong output in {name}: {problem['reason']}")
    return Judgement(True, checks)


def _repeats_previous(previous: list[Leaf], current: list[Leaf]) -> bool:
    tensors = [
        (p.value, c.value)
        for p, c in zip(previous, current, strict=False)
        if isinstance(p.value, torch.Tensor) and isinstance(c.value, torch.Tensor)
    ]
    return bool(tensors) and all(p.shape == c.shape and torch.equal(p, c) for p, c in tensors)
