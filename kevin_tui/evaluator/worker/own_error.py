"""The float32 reference's own error at each place of an output, as the float64 fallback allows it (runs in the
reference worker).

Where the reference's own rounding is past the tolerance (a long reduction), a kernel more exact than it, or summing
in another order, must not fail for that rounding; but how large it is at one place is one draw, and a place where
the reference happens to round almost exactly failed an honest split-K matvec in 1 of ~150 calls. One figure for a
whole tensor (4 times its root mean square) fixed that and let small-scale places borrow the large ones' allowance:
a kernel returning 0 for rows 1e-6 the size of the others passed (tests/test_redteam30.py). So the error is drawn
again: the reference runs REDRAWS more times, in its own dtypes and in float64, on its inputs each moved by up to one
step of its format, which draws its rounding afresh at every place and leaves the scale of what it computes there
as it was. A place's typical error is the root mean square of these draws over the places whose own draws are
within a factor SCALE_WINDOW of its own: its peers, so that a place whose few draws fell small by chance is not
left with nothing, and a place of another scale lends it nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

REDRAWS = 3  # with 2, a place's 3 draws all fell small often enough to fail a split-K matvec at 1 place in ~2500
SCALE_WINDOW = 8.0  # peers' draws may be this many times smaller or larger than a place's own
NUDGE = 2.0**-12  # how far each input moves, at most, as a share of itself: the results move ~2.4e-4 of theirs


class Truth:
    """A judged call's float64 result, and the reference's error drawn again (computed when first asked: only an
    output outside tolerance needs it, and it costs REDRAWS forwards in each precision)."""

    def __init__(self, value: Any, redraw: Callable[[], list[tuple[Any, Any]]]) -> None:
        self.value = value
        self._redraw = redraw
        self._spread: Any = None
        self._spread_known = False

    def spread(self, ref: Any) -> Any:
        """The typical own error at each place of the float32 reference `ref` (its structure, float64 tensors where
        it has a float tensor or number, None elsewhere), computed once."""
        if not self._spread_known:
            self._spread, self._spread_known = spread(ref, self.value, self._redraw()), True
        return self._spread


def nudged(args: list[Any], generator: torch.Generator) -> list[Any]:
    """Copies of `args` with every float tensor's values each moved by a random share of NUDGE of itself (of one
    step of its format where that is more), rounded back: another draw of the rounding of all the reference
    computes from them, at the same scale. Moved by one step of float32 only, x + 1e4 rounded to a step of 1e-3
    just as before, and every draw repeated the first. Other arguments as they are (copied by the caller's
    forward)."""
    moved = []
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.is_floating_point() and arg.dtype != torch.float64:
            share = torch.rand(arg.shape, dtype=torch.float64, generator=generator).to(arg.device) * 2 - 1
            reach = max(NUDGE, torch.finfo(arg.dtype).eps)
            arg = (arg.to(torch.float64) * (1 + reach * share)).to(arg.dtype)
        moved.append(arg)
    return moved


def format_step(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The distance from each of `values` to the next value of the float `dtype` away from zero."""
    _, exponent = torch.frexp(values.abs())
    return torch.ldexp(torch.ones_like(values), exponent - 1) * torch.finfo(dtype).eps


def computed_error(r: torch.Tensor, r64: torch.Tensor) -> torch.Tensor | None:
    """What the reference's float value `r` errs by beyond half a step of its format (its rounding to the format
    is as large as the value there: a bf16 matmul's at 32-64 is up to 1/8, and spread to outputs near zero it let
    them err 6x their tolerance), in float64 on the CPU, complex part by part; None where not comparable."""
    if r.is_complex() and r64.is_complex():
        r, r64 = torch.view_as_real(r.resolve_conj()), torch.view_as_real(r64.resolve_conj())
    if not r.is_floating_point() or r.shape != r64.shape:
        return None
    dtype = r.dtype
    r, r64 = r.to("cpu", torch.float64), r64.to("cpu", torch.float64)
    error = torch.nan_to_num((r - r64).abs(), nan=0.0, posinf=0.0)
    return (error - 0.5 * format_step(r, dtype)).clamp(min=0)


def typical(draws: torch.Tensor) -> torch.Tensor:
    """From `draws` (each place's errors, one row per draw, places flattened): at each place the root mean square
    of the draws at the places whose own root mean square is within SCALE_WINDOW of its own."""
    own = draws.square().mean(0).sqrt()
    ordered = own.sort().values
    sums = torch.cat([torch.zeros(1, dtype=ordered.dtype), ordered.square().cumsum(0)])
    low = torch.searchsorted(ordered, own / SCALE_WINDOW)
    high = torch.searchsorted(ordered, own * SCALE_WINDOW, right=True)
    return ((sums[high] - sums[low]) / (high - low).clamp(min=1)).clamp(min=0).sqrt()


def _leaf(value: Any, dtype: torch.dtype) -> torch.Tensor | None:
    """A tensor leaf as it is, a Python float as a 0-d tensor of `dtype`, anything else None."""
    if isinstance(value, torch.Tensor):
        return value
    return torch.tensor(value, dtype=dtype) if isinstance(value, float) else None


def spread(ref: Any, exact: Any, draws: list[tuple[Any, Any]]) -> Any:
    """The structure of `ref` with each float leaf's typical own error (a float64 tensor of its shape, complex
    ones as their real view), from the reference's error in `ref` against `exact` and in each draw's own-dtype
    output against its float64 one; None for any leaf where some result is missing or shaped otherwise."""
    if type(ref) in (tuple, list):
        results = (exact, *(part for pair in draws for part in pair))
        if not all(type(result) is type(ref) and len(result) == len(ref) for result in results):
            return None
        return type(ref)(spread(r, exact[i], [(own[i], f64[i]) for own, f64 in draws]) for i, r in enumerate(ref))
    dtype = getattr(ref, "dtype", torch.float64)  # a Number's, a tensor's; a plain float is taken as exact
    rows: list[torch.Tensor] = []
    for own, f64 in ((ref, exact), *draws):
        own, f64 = _leaf(own, dtype), _leaf(f64, torch.float64)
        error = computed_error(own, f64) if own is not None and f64 is not None and own.dtype == dtype else None
        if error is None or (rows and error.shape != rows[0].shape):
            return None
        rows.append(error)
    return typical(torch.stack([row.reshape(-1) for row in rows])).reshape(rows[0].shape)
