"""The one rule for "best": which kernel the next prompt keeps, the timeline stars, `b` jumps to,
`--accept best` commits and `kevin-tui sessions` lists.

1. By status, in this fixed order: correct, compiled (built, no device to run it), then the
   failures from nearest to furthest from working: incorrect, rejected, runtime_error, timeout,
   compile_error, format_error; anything else (pending, unknown) last.
2. Among correct kernels, by speedup vs eager, highest first. Where the evaluator measured a 95%
   interval for the speedup, its lower bound is what counts, so a noisy 1.3x [0.9, 1.7] does not
   beat a solid 1.2x [1.18, 1.22]; the point estimate then breaks ties. A correct kernel that was
   not timed counts as 0x.
3. Otherwise the earlier one wins (sorting is stable), so a tie never flips between views.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

STATUS_ORDER = (
    "correct", "compiled", "incorrect", "rejected", "runtime_error", "timeout", "compile_error", "format_error",
)  # fmt: skip

T = TypeVar("T")


@dataclass(frozen=True)
class Score:
    """What ranking looks at: a verdict's status, speedup and speedup interval."""

    status: str
    speedup: float | None = None
    interval: Sequence[float] | None = None

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    @property
    def floor(self) -> float:
        """The speedup that counts: the interval's lower bound when there is one."""
        if not self.correct:
            return 0.0
        if self.interval:
            return float(self.interval[0])
        return self.speedup or 0.0

    def key(self) -> tuple[int, float, float]:
        """Smaller is better."""
        order = STATUS_ORDER.index(self.status) if self.status in STATUS_ORDER else len(STATUS_ORDER)
        point = (self.speedup or 0.0) if self.correct else 0.0
        return (order, -self.floor, -point)


def speed_class(
    speedup: float | None, interval: Sequence[float] | None = None
) -> Literal["faster", "slower", "same", "unmeasured"]:
    """The one reading of a speedup for every message (commits, prompts, verdicts, questions): faster
    or slower only when the 95% interval lies wholly on that side of 1 ("same" when it holds 1); the
    point estimate alone when no interval was measured."""
    if speedup is None:
        return "unmeasured"
    low, high = (interval[0], interval[1]) if interval else (speedup, speedup)
    return "faster" if low > 1 else "slower" if high < 1 else "same"


def ranked(items: Iterable[T], score: Callable[[T], Score]) -> list[T]:
    """Best first."""
    return sorted(items, key=lambda item: score(item).key())


def best_correct(items: Iterable[T], score: Callable[[T], Score]) -> T | None:
    """The best correct item, or None when none is correct."""
    order = ranked(items, score)
    return order[0] if order and score(order[0]).correct else None
