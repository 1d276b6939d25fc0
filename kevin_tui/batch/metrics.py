"""The figures of Kevin's evaluation protocol (Baronio et al., arXiv 2507.11948) and KernelBench's
(Ouyang et al., arXiv 2502.10517), from the kernels of k trajectories per problem.

- A kernel's speedup is its verdict's speedup vs eager PyTorch when it is correct, else 0.
- A trajectory's speedup is that of its fastest correct kernel, 0 when none is correct; it is
  correct when any of its kernels is.
- best@k (per problem): the best of its k trajectories; avg@k: their mean. Overall, each problem
  weighs the same: best@k and avg@k figures are means over problems.
- correctness: best@k is the share of problems with a correct kernel in any trajectory; avg@k the
  mean share of correct trajectories.
- mean speedup: the mean of the speedups above (incorrect ones count 0). Geometric mean: over the
  correct ones only (KernelBench's `geometric_mean_speed_ratio_correct_only`); for avg@k, over
  problems of the geometric mean of each one's correct trajectories. The same vs torch.compile
  where the run timed it.
- fast_p: the share of problems with a correct kernel more than p times faster than eager
  (KernelBench's fast_p, strictly greater); avg@k: the mean share of trajectories that have one.
- Kevin's reward for one kernel: 0.3 * correct + speedup * correct; a turn's return is the
  discounted sum of its own and later turns' rewards, R_t = sum_{i>=t} gamma^(i-t) s_i, gamma 0.4.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

FAST_P = (0.0, 1.0, 1.5, 2.0)
CORRECT_BONUS = 0.3
GAMMA = 0.4


@dataclass(frozen=True)
class Kernel:
    """One turn's kernel as it was judged."""

    turn: int
    status: str
    speedup: float | None = None
    speedup_compile: float | None = None

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def gain(self, compile_baseline: bool = False) -> float:
        """Its speedup (vs eager, or vs torch.compile) when correct, else 0; untimed counts 0."""
        value = self.speedup_compile if compile_baseline else self.speedup
        return (value or 0.0) if self.correct else 0.0


@dataclass(frozen=True)
class Trajectory:
    kernels: tuple[Kernel, ...]

    @property
    def correct(self) -> bool:
        return any(k.correct for k in self.kernels)

    def speedup(self, compile_baseline: bool = False, by_turn: int | None = None) -> float:
        """Its fastest correct kernel's speedup (up to turn `by_turn`), 0 when none is correct."""
        kernels = [k for k in self.kernels if by_turn is None or k.turn <= by_turn]
        return max((k.gain(compile_baseline) for k in kernels), default=0.0)


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def geometric_mean(values: Iterable[float]) -> float | None:
    """Over the positive values only (correct kernels); None when there is none."""
    logs = [math.log(v) for v in values if v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


@dataclass(frozen=True)
class ProblemFigures:
    """One problem's k trajectories."""

    trajectories: int
    correct: int  # trajectories with a correct kernel
    best_speedup: float
    avg_speedup: float
    best_speedup_compile: float
    avg_speedup_compile: float

    @classmethod
    def of(cls, trajectories: Sequence[Trajectory]) -> ProblemFigures:
        eager = [t.speedup() for t in trajectories]
        compiled = [t.speedup(compile_baseline=True) for t in trajectories]
        return cls(
            len(trajectories), sum(t.correct for t in trajectories), max(eager, default=0.0), mean(eager),
            max(compiled, default=0.0), mean(compiled),
        )  # fmt: skip

    @property
    def best_correct(self) -> bool:
        return self.correct > 0

    @property
    def avg_correct(self) -> float:
        return self.correct / self.trajectories if self.trajectories else 0.0


@dataclass(frozen=True)
class Figures:
    """One column of the table: best@k or avg@k, over all problems."""

    correctness: float
    mean_speedup: float
    geomean_speedup: float | None
    mean_speedup_compile: float | None  # None: torch.compile was not timed in this run
    geomean_speedup_compile: float | None
    fast: dict[float, float]


def summarise(problems: Sequence[Sequence[Trajectory]], compile_timed: bool) -> dict[str, Figures]:
    """best@k and avg@k over the problems (those with at least one trajectory)."""
    return {"best": _column(problems, True, compile_timed), "avg": _column(problems, False, compile_timed)}


def _column(problems: Sequence[Sequence[Trajectory]], best: bool, compile_timed: bool) -> Figures:
    """Each problem contributes a group of values, its best trajectory's (best@k) or one per
    trajectory (avg@k); a problem's figure is its group's mean (geometric mean over the correct
    ones), and the column is the mean over problems (geometric mean over problems that have one)."""

    def groups(value: Callable[[Trajectory], float]) -> list[list[float]]:
        found = []
        for trajectories in problems:
            values = [value(t) for t in trajectories]
            if values:
                found.append([max(values)] if best else values)
        return found

    eager = groups(lambda t: t.speedup())
    compiled = groups(lambda t: t.speedup(compile_baseline=True))
    correct = groups(lambda t: 1.0 if t.correct else 0.0)

    def geomean(speedups: list[list[float]]) -> float | None:
        return geometric_mean(g for g in map(geometric_mean, speedups) if g is not None)

    return Figures(
        correctness=mean(map(mean, correct)),
        mean_speedup=mean(map(mean, eager)),
        geomean_speedup=geomean(eager),
        mean_speedup_compile=mean(map(mean, compiled)) if compile_timed else None,
        geomean_speedup_compile=geomean(compiled) if compile_timed else None,
        fast={p: mean(mean(1.0 if v > p else 0.0 for v in group) for group in eager) for p in FAST_P},
    )


def best_by_turn(problems: Sequence[Sequence[Trajectory]], turns: int) -> dict[str, list[float]]:
    """The curve of the best speedup so far after each turn (1..turns): best@k and avg@k."""
    present = [ts for ts in problems if ts]
    curve: dict[str, list[float]] = {"best": [], "avg": []}
    for turn in range(1, turns + 1):
        curve["best"].append(mean(max(t.speedup(by_turn=turn) for t in ts) for ts in present))
        curve["avg"].append(mean(mean(t.speedup(by_turn=turn) for t in ts) for ts in present))
    return curve


def reward(kernel: Kernel) -> float:
    """Kevin's score for one kernel: 0.3 for being correct plus its speedup; 0 when it is not."""
    return CORRECT_BONUS + kernel.gain() if kernel.correct else 0.0


def discounted_returns(rewards: Sequence[float], gamma: float = GAMMA) -> list[float]:
    """Each turn's return: its reward plus the later turns' rewards discounted by gamma per turn."""
    returns: list[float] = []
    later = 0.0
    for value in reversed(rewards):
        later = value + gamma * later
        returns.append(later)
    return returns[::-1]
