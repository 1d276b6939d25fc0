"""What the reference worker hands the judge as a call's float64 truth (own_error.Truth), built in tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kevin_tui.evaluator.worker.own_error import REDRAWS, Truth, nudged


def exactly(value: Any, draws: list[tuple[Any, Any]] | None = None) -> Callable[[], Truth]:
    """A float64 result with the reference's error drawn again as `draws` (own-dtype output, float64 output)
    pairs; none: the reference's own error in the judged call is all there is to go on."""
    return lambda: Truth(value, lambda: list(draws or []))


def redrawn(forward: Callable[..., Any], *inputs: torch.Tensor, seed: int = REDRAWS) -> Callable[[], Truth]:
    """`forward` (written for any dtype) of `inputs` in float64, drawn again as the reference worker does (its
    generator's seed is secret; here `seed`, fixed so a test sees the same draws each run)."""

    def widened(args: list[torch.Tensor]) -> Any:
        return forward(*(a.double() for a in args))

    def redraw() -> list[tuple[Any, Any]]:
        generator = torch.Generator().manual_seed(seed)
        return [
            (forward(*moved), widened(moved)) for moved in (nudged(list(inputs), generator) for _ in range(REDRAWS))
        ]

    return lambda: Truth(widened(list(inputs)), redraw)
