"""Comparing a candidate's output with the reference's (runs in the reference worker).

The reference worker never imports the candidate, and reads its outputs from pickle-free files, so
nothing the candidate does can change how it is judged. The structure must match exactly (a list
where the reference returns a tensor fails), and the tolerance is made meaningful: the absolute
tolerance never exceeds `rtol` times the largest reference value, so a candidate that returns zeros
cannot pass a problem whose outputs are all tiny. The comparison runs on the evaluation device when
there is one, in float32 for every float type but float64, so a large output costs the judge
seconds, not minutes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kevin_tui.evaluator.verdict import Check  # the verdict's own: the host rebuilds it from its fields
from kevin_tui.evaluator.worker.own_error import Truth, format_step
from kevin_tui.evaluator.worker.tensorfile import Leaf, Other

TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
}


@dataclass
class Judgement:
    passed: bool
    checks: list[Check] = field(default_factory=list)
    mismatch: dict[str, Any] = field(default_factory=dict)
    message: str = ""


class Number(float):
    """A Python float the reference returned, with the dtype it was computed in: its tolerance, and the dtype the
    precision evidence measures it in (a plain float is taken as torch's default dtype's)."""

    dtype: torch.dtype

    def __new__(cls, value: float, dtype: torch.dtype) -> Number:
        number = super().__new__(cls, value)
        number.dtype = dtype
        return number


def typed_numbers(value: Any, dtype: torch.dtype) -> Any:
    """`value` with every Python float in it a Number of `dtype`."""
    if type(value) is float:
        return Number(value, dtype)
    if type(value) in (tuple, list):
        return type(value)(typed_numbers(item, dtype) for item in value)
    return value


def number_dtype(value: Any) -> torch.dtype:
    return value.dtype if isinstance(value, Number) else torch.get_default_dtype()


def number_tensor(value: float) -> torch.Tensor:
    """A Python float as a 0-d tensor of its dtype (a Number's; float64, its exact value, for a plain float)."""
    return torch.tensor(value, dtype=value.dtype if isinstance(value, Number) else torch.float64)


def widest_float(tensors: list[Any]) -> torch.dtype:
    """The dtype a Python number the reference computes from `tensors` (its inputs, parameters and buffers) is in:
    torch's type promotion computes an expression in the widest float dtype among its operands, so `.item()` of
    its result has that precision; torch's default dtype where none is a float (integer inputs)."""
    floats = [t.dtype for t in tensors if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return min(floats, key=lambda dtype: torch.finfo(dtype).eps, default=torch.get_default_dtype())


def tolerance_for(dtype: torch.dtype, atol: float | None, rtol: float | None) -> tuple[float, float]:
    default = TOLERANCES.get(dtype, (0.0, 0.0))
    return (default[0] if atol is None else atol, default[1] if rtol is None else rtol)


def describe(value: Any) -> str:
    if isinstance(value, Leaf):
        return "a torch.Tensor"
    if isinstance(value, Other):
        return f"a {value.type_name}"
    return f"a {type(value).__name__}"


def compare_tensor(ref: torch.Tensor, out: torch.Tensor, atol: float | None, rtol: float | None) -> dict | None:
    """None when `out` matches `ref`; otherwise the mismatch figures. Both on the same device."""
    if out.shape != ref.shape:
        return {"reason": f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}"}
    if out.dtype != ref.dtype:
        return {"reason": f"dtype {out.dtype}, expected {ref.dtype}"}
    if ref.numel() == 0:
        return None
    if ref.is_complex():  # each part on its own, with the tolerance of the parts' dtype (a cast would drop Im)
        return compare_tensor(torch.view_as_real(ref.resolve_conj()), torch.view_as_real(out.resolve_conj()), atol,
                              rtol)  # fmt: skip
    if not ref.is_floating_point():
        if torch.equal(out, ref):
            return None
        wrong = int((out != ref).sum())
        return {"reason": f"{wrong} of {ref.numel()} values differ (exact match required for {ref.dtype})"}
    if torch.equal(out, ref):  # bitwise the same (NaN is never equal to itself: those take the long way)
        return None
    work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    a, r = out.to(work), ref.to(work)
    # each side's extremes in one pass: all finite exactly when both are (NaN propagates), which spares the
    # masks in the usual case; every timed call is judged, so this runs thousands of times an evaluation
    (r_low, r_high), (a_low, a_high) = _extremes(r), _extremes(a)
    ref_finite: torch.Tensor | None = None
    if not all(math.isfinite(v) for v in (r_low, r_high, a_low, a_high)):
        ref_finite, out_finite = torch.isfinite(r), torch.isfinite(a)
        bad_nonfinite = ref_finite & ~out_finite
        if bool(bad_nonfinite.any()):
            return {"reason": f"{int(bad_nonfinite.sum())} NaN/Inf values where the reference has finite ones"}
        if not bool(ref_finite.all()):
            r_nf, a_nf = r[~ref_finite], a[~ref_finite]
            same_nan = torch.equal(torch.isnan(r_nf), torch.isnan(a_nf))
            if not same_nan or not torch.equal(r_nf[~torch.isnan(r_nf)], a_nf[~torch.isnan(r_nf)]):
                return {"reason": "NaN/Inf values differ from the reference's"}
            r, a = r[ref_finite], a[ref_finite]
            (r_low, r_high), (a_low, a_high) = _extremes(r), _extremes(a)
    atol_, rtol_ = tolerance_for(ref.dtype, atol, rtol)
    effective_atol = min(atol_, rtol_ * max(abs(r_low), abs(r_high)))
    diff = (a - r).abs_()
    over = diff > r.abs().mul_(rtol_).add_(effective_atol)
    if r.numel() > 1 and r_high != r_low and a_high == a_low:
        reason = f"constant output {a_low:.6g} where the reference varies"
    elif bool(over.any()):
        reason = f"{int(over.sum())} of {r.numel()} values outside tolerance"
    else:
        return None
    if ref_finite is None:
        ref_finite = torch.ones_like(ref, dtype=torch.bool)
    return {"reason": reason, **_figures(ref, out, ref_finite, r, diff, over, effective_atol, rtol_)}


def _extremes(values: torch.Tensor) -> tuple[float, float]:
    """(min, max), NaN when any value is NaN; (0, 0) for no values."""
    if values.numel() == 0:
        return 0.0, 0.0
    low, high = torch.aminmax(values)
    return float(low), float(high)


def _figures(ref, out, finite_mask, finite_ref, diff, over, atol, rtol) -> dict[str, Any]:
    """Where the worst element is and how far off it is; `diff` and `finite_ref` cover finite positions only."""
    positions = finite_mask.reshape(-1).nonzero().reshape(-1)
    worst = int(positions[int(diff.argmax())])
    index = [int(i) for i in torch.unravel_index(torch.tensor(worst), ref.shape)] if ref.dim() else []
    expected, got = ref.reshape(-1)[worst], out.reshape(-1)[worst]
    rel = diff / finite_ref.abs().clamp_min(1e-12)
    return {
        "max_abs_error": float(diff.max()),
        "max_rel_error": float(rel.max()),
        "mismatched": int(over.sum()),
        "total": int(diff.numel()),
        "worst_index": index,
        "expected": float(expected),
        "got": float(got),
        "atol": atol,
        "rtol": rtol,
    }


def compare_output(
    ref: Any, got: Any, device: str, atol: float | None, rtol: float | None, where: str = "", precise: Any = None,
    spread: Any = None,
) -> dict | None:  # fmt: skip
    """Compare exact structures; `got` is what tensorfile.read(with_devices=True) returned. With `precise` (the
    float64 result, the reference's structure) and `spread` (the reference's typical own error at each place,
    own_error.Truth.spread), a float tensor outside tolerance passes where it is within the float32 reference's
    own error of it; every other part is judged exactly as without it (the fallback judged only the float tensors
    it could pair before, so a later output that was None passed)."""
    if isinstance(ref, torch.Tensor):
        if not isinstance(got, Leaf):
            return {"reason": f"{where}returned {describe(got)}, not a plain torch.Tensor"}
        if got.device != device:
            return {"reason": f"{where}tensor on {got.device}, expected {device}"}
        problem = compare_tensor(ref.to(device), got.tensor.to(device), atol, rtol)
        excused = problem and widens(problem) and isinstance(precise, torch.Tensor)
        if excused and within_reference_error(ref, precise, got.tensor, atol, rtol, _tensor_or_none(spread)):
            return None
        if problem:
            problem["reason"] = where + problem["reason"]
        return problem
    if type(ref) in (tuple, list):
        if type(got) is not type(ref):
            return {"reason": f"{where}returned {describe(got)}, expected a {type(ref).__name__}"}
        if len(got) != len(ref):
            return {"reason": f"{where}{len(got)} outputs, expected {len(ref)}"}
        parts, spreads = (_parts(value, ref) for value in (precise, spread))
        for index, (r, g, p, e) in enumerate(zip(ref, got, parts, spreads, strict=True)):
            if problem := compare_output(r, g, device, atol, rtol, f"{where}output {index}: ", p, e):
                return problem
        return None
    if isinstance(ref, float) and type(got) is float:
        problem = compare_number(ref, got, atol, rtol, where)
        excused = problem and widens(problem) and isinstance(precise, float)
        if excused and within_reference_error(
            number_tensor(ref), number_tensor(precise), number_tensor(got), atol, rtol, _tensor_or_none(spread)
        ):
            return None
        return problem
    if type(got) is not type(ref) or got != ref:
        return {"reason": f"{where}{got!r}, expected {ref!r}"[:300]}
    return None


def _parts(value: Any, ref: list | tuple) -> list[Any] | tuple[Any, ...]:
    """`value`'s items where it has the structure of `ref`'s, else one None for each."""
    return value if type(value) is type(ref) and len(value) == len(ref) else [None] * len(ref)


def _tensor_or_none(value: Any) -> torch.Tensor | None:
    return value if isinstance(value, torch.Tensor) else None


def compare_number(ref: float, got: float, atol: float | None, rtol: float | None, where: str) -> dict | None:
    """A Python float, with the tolerance of the dtype the reference computed it in (a Number's)."""
    atol, rtol = tolerance_for(number_dtype(ref), atol, rtol)
    if math.isnan(ref) or math.isnan(got) or math.isinf(ref) or math.isinf(got):
        matches = (math.isnan(ref) and math.isnan(got)) or got == ref
    else:
        matches = abs(got - ref) <= atol + rtol * abs(ref)
    reason = f"{where}{got!r}, expected {ref!r}: outside tolerance (atol {atol:g}, rtol {rtol:g})"  # the fallback's
    return None if matches else {"reason": reason[:300]}


# How far past the float32 reference's typical own error at a place (own_error.py) an honest kernel's rounding may
# go there: errors of float sums in another order spread like the reference's, and 4 of its standard deviations
# are passed at one value in ~16,000 by a kernel erring as the reference does.
OWN_ERROR_SPREAD = 4.0
AGREEMENT_SHARE = 0.5  # two runs on identical inputs may differ by this share of the tolerance (atomics' rounding)


def _flat(value: Any) -> list[torch.Tensor | None]:
    """The tensors of a structure in order (reference tensors or Leaf objects read back; a Python float as a
    0-d tensor of its dtype, float64 for a candidate's; None for the rest)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, Leaf):
        return [value.tensor]
    if isinstance(value, float):
        return [number_tensor(value)]
    if type(value) in (tuple, list):
        return [t for item in value for t in _flat(item)]
    return [None]


def _leaf_pairs(*values: Any) -> list[tuple[torch.Tensor, ...]]:
    """The tensors at the same places of structures the judge already found alike."""
    return [group for group in zip(*map(_flat, values), strict=False) if all(t is not None for t in group)]


def disagreement(ref: Any, a: Any, b: Any, atol: float | None, rtol: float | None, spread: Any = None) -> str | None:
    """Why two runs on identical inputs, each within tolerance of the reference, do not agree with each
    other (uninitialised memory, a race), or None. Exact for integers; for floats (complex ones part by part: they
    were compared exactly) within half the tolerance, so the rounding of atomics in another order passes, and a
    16-bit output one step of its format apart. With `spread` (own_error.Truth.spread), a float tensor's runs may
    also differ as two honest roundings there may: OWN_ERROR_SPREAD of their difference's standard deviations, each
    erring as the reference typically does at that place. Over a long reduction that rounding is past the tolerance, and
    an honest kernel adding its partials in another order each call (float atomics) differs from itself by as much
    (tests/candidates/redteam28/); taken as the reference's largest error anywhere, a race in rows of a smaller
    scale passed (tests/test_redteam30.py)."""
    spreads = _flat(spread) if spread is not None else []
    for place, (r, x, y) in enumerate(zip(_flat(ref), _flat(a), _flat(b), strict=False)):
        if r is None or x is None or y is None:
            continue
        if r.is_complex() and x.is_complex() and y.is_complex():  # part by part, as judged: exact equality failed
            r, x, y = (torch.view_as_real(t.resolve_conj()) for t in (r, x, y))  # complex sums in another order
        if not r.is_floating_point():
            if not torch.equal(x, y):
                return f"{int((x != y).sum())} of {r.numel()} values differ between the two runs"
            continue
        atol_, rtol_, dtype = *tolerance_for(r.dtype, atol, rtol), r.dtype
        work = torch.float64 if r.dtype == torch.float64 else torch.float32
        typical = spreads[place] if place < len(spreads) else None
        own = typical if typical is not None and typical.shape == r.shape else torch.zeros(r.shape)
        r, x, y = r.to(work), x.to(work), y.to(work)
        finite = torch.isfinite(r)
        if not bool(finite.any()):
            continue
        r, x, y, own = r[finite], x[finite], y[finite], own.to(r.device, work)[finite]
        allowed = AGREEMENT_SHARE * (min(atol_, rtol_ * float(r.abs().max())) + rtol_ * r.abs())
        allowed = allowed + math.sqrt(2) * OWN_ERROR_SPREAD * own
        if dtype in (torch.bfloat16, torch.float16):  # two roundings of float32 sums a little apart: one step
            allowed = allowed + format_step(r, dtype)
        apart = (x - y).abs()
        if bool((apart > allowed).any()):
            return (f"{int((apart > allowed).sum())} of {r.numel()} values differ between the two runs "
                    f"(by up to {float(apart.max()):.3g})")  # fmt: skip
    return None


def _normalised_errors(
    ref64: Any, got: Any, dtype_of: Any, atol: float | None, rtol: float | None
) -> list[torch.Tensor]:
    """Each comparable leaf's errors of `got` against a float64 reference, divided by the tolerance its dtype
    allows (`dtype_of`: the float32 reference, whose dtypes set the tolerance), finite values only."""
    errors = []
    for r64, x, r in _leaf_pairs(ref64, got, dtype_of):
        if r.is_complex() and r64.is_complex() and x.is_complex():
            r64, x, r = (torch.view_as_real(t.resolve_conj()) for t in (r64, x, r))
        if not r.is_floating_point() or r64.shape != x.shape:
            continue
        atol_, rtol_ = tolerance_for(r.dtype, atol, rtol)
        r64, x = r64.to(torch.float64), x.to(r64.device, torch.float64)  # a candidate's output is read back on the CPU
        finite = torch.isfinite(r64) & torch.isfinite(x)
        if not bool(finite.any()):
            continue
        r64, x = r64[finite], x[finite]
        allowed = min(atol_, rtol_ * float(r64.abs().max())) + rtol_ * r64.abs()
        errors.append((x - r64).abs() / allowed.clamp_min(1e-300))
    return errors


def tolerance_share(ref64: Any, got: Any, dtype_of: Any, atol: float | None, rtol: float | None) -> float | None:
    """The largest error of `got` against a float64 reference, as a share of the tolerance its dtype allows
    (`dtype_of`: the float32 reference, whose dtypes set the tolerance); None when nothing is comparable. A float64
    output is measured too, against the reference itself (its own share 0): a kernel computing a float64 problem in
    float32 stays inside float64's 1e-7 where it rounds once, and only here is it seen
    (tests/candidates/redteam21/float64_problem_in_float32.py). A complex output is measured part by part, as the
    judge compares it (complex_output_narrowed.py: unmeasured, a product of inputs cut to 17 bits got no warning)."""
    errors = _normalised_errors(ref64, got, dtype_of, atol, rtol)
    return max(float(e.max()) for e in errors) if errors else None


def rms_share(ref64: Any, got: Any, dtype_of: Any, atol: float | None, rtol: float | None) -> float | None:
    """The root mean square of the same errors over every compared value: steadier than the largest one where two
    close results are compared with each other (worker/rounding_probe.py)."""
    errors = _normalised_errors(ref64, got, dtype_of, atol, rtol)
    if not errors:
        return None
    squares = torch.cat([e.reshape(-1) for e in errors]).square()
    return float(squares.mean().sqrt())


def sampled(value: Any, count: int) -> list[Any]:
    """The tensors of a structure, each of more than `count` values cut to `count` of them, at positions its size
    alone fixes (so outputs alike are cut alike): the errors' root mean square is as steady on those, and measuring
    every value of a 512K-value output took ~0.3 s a rounding of the probe's 5 s (worker/rounding_probe.py)."""
    cut = []
    for t in _flat(value):
        if t is not None and t.numel() > count:
            positions = torch.randint(t.numel(), (count,), generator=torch.Generator().manual_seed(t.numel()))
            t = t.reshape(-1)[positions.to(t.device)]
        cut.append(t)
    return cut


def same_output(a: Any, b: Any) -> bool:
    """Two candidate outputs read from files are identical (a repeated, stale answer)."""
    if isinstance(a, Leaf) and isinstance(b, Leaf):
        return a.tensor.shape == b.tensor.shape and torch.equal(a.tensor, b.tensor)
    if type(a) in (tuple, list) and type(a) is type(b) and len(a) == len(b):
        return all(same_output(x, y) for x, y in zip(a, b, strict=True))
    return False


def widens(problem: dict) -> bool:
    """A mismatch the float64 fallback may excuse: values outside tolerance (or constant where the reference
    varies), never another structure, type, dtype, shape or device."""
    return any(why in problem["reason"] for why in ("outside tolerance", "constant output"))


def within_reference_error(
    r: torch.Tensor, r64: torch.Tensor, x: torch.Tensor, atol: float | None, rtol: float | None,
    typical: torch.Tensor | None = None,
) -> bool:  # fmt: skip
    """Whether every value of the float tensor `x` is as close to the float64 result `r64` as the tolerance plus
    the float32 reference `r`'s own error there allows: a kernel more exact than the reference (a float64
    accumulator, another summation order over a long reduction) must not fail for the reference's rounding. That
    error is the larger of the reference's at that place and OWN_ERROR_SPREAD times its `typical` own error there
    (own_error.py: at one place the reference may happen to round almost exactly where an honest kernel summing in
    another order does not). A complex tensor part by part, as it is compared
    (tests/candidates/redteam21/honest_complex_exact_sum.py)."""
    if r.is_complex() and r64.is_complex() and x.is_complex():
        r, r64, x = (torch.view_as_real(t.resolve_conj()) for t in (r, r64, x))
    if not r.is_floating_point() or r.dtype == torch.float64 or not (r.shape == r64.shape == x.shape):
        return False
    atol_, rtol_ = tolerance_for(r.dtype, atol, rtol)
    r, r64, x = (t.to("cpu", torch.float64) for t in (r, r64, x))
    if not (bool(torch.isfinite(r).all()) and bool(torch.isfinite(x).all()) and bool(torch.isfinite(r64).all())):
        return False
    own = (r - r64).abs()
    spread = typical.to("cpu", torch.float64) if typical is not None and typical.shape == r.shape else 0 * own
    allowed = min(atol_, rtol_ * float(r.abs().max())) + rtol_ * r.abs() + torch.maximum(own, OWN_ERROR_SPREAD * spread)
    if bool(((x - r64).abs() > allowed).any()):
        return False
    return not _constant_against_varying_truth(r, r64, x)


def _constant_against_varying_truth(r: torch.Tensor, r64: torch.Tensor, x: torch.Tensor) -> bool:
    """A constant answer where the reference varies is right only where the truth varies less than the
    reference's own rounding (a softmax's row sums: exactly 1, ~1e-7 apart in float32)."""
    if x.numel() < 2 or float(x.max()) != float(x.min()) or float(r.max()) == float(r.min()):
        return False
    return float(r64.max() - r64.min()) > float((r - r64).abs().max())


def judge_trial(
    ref: Any, runs: dict[str, Any], device: str, atol: float | None, rtol: float | None, label: str,
    previous: dict[str, Any] | None = None, precise: Callable[[], Truth | None] | None = None,
) -> Judgement:  # fmt: skip
    """`runs` holds the outputs of one trial run 'before' and 'after' the reference ran in the candidate's process.
    `precise` gives the trial's output in float64 and the reference's own error (computed only when a run is
    outside tolerance or the two disagree)."""
    checks: list[Check] = []
    for order, got in runs.items():
        name = f"{label} ({order} the reference)" if len(runs) > 1 else label
        problem = compare_output(ref, got, device, atol, rtol)
        if problem is not None and precise is not None and widens(problem) and (truth := precise()) is not None:
            problem = compare_output(ref, got, device, atol, rtol, precise=truth.value)  # the whole output again
            if problem is not None and widens(problem):  # past the reference's own error there: drawn again
                problem = compare_output(ref, got, device, atol, rtol, precise=truth.value, spread=truth.spread(ref))
            if problem is None:
                checks.append(Check(f"output {name}", True, "within the float32 reference's own error of the "
                                    "float64 result"))  # fmt: skip
                continue
        if problem is None:
            checks.append(Check(f"output {name}", True))
            continue
        if previous is not None and order in previous and same_output(previous[order], got):
            problem["reason"] += "; identical to the previous call's output (a cached answer?)"
        checks.append(Check(f"output {name}", False, problem["reason"]))
        problem["order"] = order
        return Judgement(False, checks, problem, f"wrong output in {name}: {problem['reason']}")
    pair = list(runs.values())
    why = disagreement(ref, pair[0], pair[1], atol, rtol) if len(pair) == 2 else None
    if why and precise is not None and (truth := precise()) is not None:  # by more than the reference's own error?
        why = disagreement(ref, pair[0], pair[1], atol, rtol, truth.spread(ref))
    if why:
        message = f"{label}: two runs on identical inputs disagree, {why} (uninitialised memory or a race?)"
        checks.append(Check(f"{label}: the same answer twice", False, why))
        return Judgement(False, checks, {"reason": message}, message)
    if len(runs) == 2:
        checks.append(Check(f"{label}: the same answer twice", True))
    return Judgement(True, checks)
