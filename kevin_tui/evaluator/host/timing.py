"""Timing in interleaved rounds, checked against the host's clock, with an interval on the speedup.

The reference and the candidate are timed in alternating rounds, in a random order each round, so
whatever else the machine is doing lands on both. Each worker reports its per-call times; the host
measures each round itself (it knows how many calls were made) and compares the time spent outside
the reported calls with the reference's, which runs the very same loop: a candidate whose reported
times are much shorter than what the host's clock saw is rejected, whatever it did to the clocks in
its own process. The comparison uses each side's least time outside the calls over all rounds: a busy
machine only ever adds time, so the minimum is the honest loop's real overhead, while a candidate
that hides its work outside the reported calls pays for it in every round. The speedup is the ratio
of median per-call times, and its 95% interval comes from a bootstrap over rounds (paired, since
both sides of a round share the machine's state then).

Two processes also differ by themselves (where their memory landed, their caches): both workers run
the reference model again right after each timed call, as a control, and the interval is widened to
cover the speedup the ratio of the two controls implies. A candidate that tampers with its control
can only widen its own interval, never raise its lower bound.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field

from kevin_tui.evaluator.verdict import Timing

CPU_ROUNDS, CUDA_ROUNDS = 10, 20
CPU_ROUND_S, CUDA_ROUND_S = 0.03, 0.01
MAX_CALLS, MIN_CALLS = 200, 3
OUTPUT_BYTES_PER_ROUND = 16 << 20  # the round's output slots: more, and the allocator behaves differently
POOL_BYTES = 256 << 20
BOOTSTRAP_RESAMPLES = 1000
# Time outside the reported calls may exceed the reference's by this share of the candidate's reported
# per-call time, plus this share of the reference's own time outside its calls (the two processes'
# allocators and caches differ), plus a floor for scheduling jitter, before the reported times are refused.
EXCESS_SHARE = 0.5
OVERHEAD_SHARE = 0.25
EXCESS_FLOOR_MS = 0.02
# The reference model timed in the candidate's process may not run this much faster than in its own worker
# (what the candidate's own call leaves in the caches can make it up to ~3x faster on the CPU; a clock
# slowed to make the candidate look fast makes it look as fast as everything else it times).
MIN_PROCESS_BIAS = 0.2


@dataclass
class TimingPlan:
    rounds: int
    warmup_calls: int = 3
    pool_bytes: int = POOL_BYTES
    fixed_calls: int | None = None  # from --timing-trials: calls per round, not adapted

    @classmethod
    def for_device(cls, device: str, timing_trials: int | None = None) -> TimingPlan:
        rounds = CUDA_ROUNDS if device.startswith("cuda") else CPU_ROUNDS
        if timing_trials:  # about that many calls in all, never fewer than 3 per round nor 3 rounds
            calls = max(MIN_CALLS, math.ceil(timing_trials / rounds))
            return cls(max(3, min(rounds, math.ceil(timing_trials / calls))), fixed_calls=calls)
        return cls(rounds)

    def calls_per_round(self, device: str, per_call_ms: float, output_bytes: int) -> int:
        """Enough calls for a round to last ~30 ms (CPU) / 10 ms (CUDA), within the memory for outputs."""
        if self.fixed_calls:
            return self.fixed_calls
        target = CUDA_ROUND_S if device.startswith("cuda") else CPU_ROUND_S
        calls = math.ceil(target * 1e3 / max(per_call_ms, 1e-3))
        by_memory = OUTPUT_BYTES_PER_ROUND // max(1, output_bytes)
        return max(MIN_CALLS, min(MAX_CALLS, calls, max(1, by_memory)))


@dataclass
class Round:
    """One side's round: what the worker reported and what the host's clock saw."""

    samples_ms: list[float]
    synced_ms: list[float] | None
    window_ms: float  # host clock, from the command to the reply
    output_ms: float = 0.0  # host clock, writing one output for the judge
    control_ms: list[float] | None = None  # the reference model timed in the candidate's process

    @property
    def calls(self) -> int:
        return len(self.samples_ms)

    @property
    def reported_ms(self) -> float:
        """The worker's own wall-clock time of its calls (device-synced on CUDA), control calls included."""
        return sum(self.synced_ms if self.synced_ms is not None else self.samples_ms) + sum(self.control_ms or [])

    @property
    def outside_ms_per_call(self) -> float:
        return max(0.0, self.window_ms + self.output_ms - self.reported_ms) / self.calls


@dataclass
class Side:
    rounds: list[Round] = field(default_factory=list)

    def samples(self) -> list[float]:
        return [s for r in self.rounds for s in r.samples_ms]

    def synced(self) -> list[float]:
        return [s for r in self.rounds for s in (r.synced_ms or [])]

    def control(self) -> list[float]:
        return [s for r in self.rounds for s in (r.control_ms or [])]

    def median(self) -> float:
        return statistics.median(self.samples())

    def timings(self, device: str) -> dict[str, Timing]:
        if device.startswith("cuda"):
            return {
                "events": Timing.from_samples(
                    self.samples(), "CUDA events, L2 flushed, checked against the host clock"
                ),
                "synced_wall": Timing.from_samples(self.synced(), "wall clock with device-wide sync"),
            }
        return {"wall": Timing.from_samples(self.samples(), "wall clock per call, checked against the host clock")}


@dataclass
class ClockCheck:
    """The figures behind the host clock's check (kept in the verdict's evidence)."""

    per_call_ms: float  # what the candidate reported (median)
    host_per_call_ms: float  # what the host's clock saw per call (median round)
    outside_ms: float  # least time per call outside the reported calls, candidate
    reference_outside_ms: float  # the same for the reference's identical loop
    allowed_ms: float
    process_bias: float

    def problem(self) -> str | None:
        """Why the candidate's reported times cannot be true, or None."""
        if self.process_bias < MIN_PROCESS_BIAS:
            return (
                f"the candidate's process timed the reference model {1 / self.process_bias:.1f}x faster than the "
                "reference's own worker did: the clocks in that process cannot be trusted"
            )
        excess = self.outside_ms - self.reference_outside_ms
        if excess <= self.allowed_ms:
            return None
        return (
            f"the candidate reported {self.per_call_ms:.4f} ms per call, but the host's clock saw "
            f"{self.host_per_call_ms:.4f} ms per call ({excess:.4f} ms more outside the calls than the reference's "
            f"identical loop; {self.allowed_ms:.4f} ms allowed)"
        )


def clock_check(candidate: Side, reference: Side) -> ClockCheck:
    ref_outside = min(r.outside_ms_per_call for r in reference.rounds)
    per_call = statistics.median(candidate.samples())
    return ClockCheck(
        per_call_ms=per_call,
        host_per_call_ms=statistics.median(r.window_ms / r.calls for r in candidate.rounds),
        outside_ms=min(r.outside_ms_per_call for r in candidate.rounds),
        reference_outside_ms=ref_outside,
        allowed_ms=EXCESS_SHARE * per_call + OVERHEAD_SHARE * ref_outside + EXCESS_FLOOR_MS,
        process_bias=process_bias(reference, candidate),
    )


def speedup_interval(reference: Side, candidate: Side, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of median(reference) / median(candidate), resampling paired rounds, widened
    to cover the same-process estimate when the candidate's worker timed a control."""
    ref = [r.samples_ms for r in reference.rounds]
    cand = [r.samples_ms for r in candidate.rounds]
    rng = random.Random(seed)
    n = len(ref)
    ratios = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        picks = [rng.randrange(n) for _ in range(n)]
        c = statistics.median([s for i in picks for s in cand[i]])
        ratios.append(statistics.median([s for i in picks for s in ref[i]]) / c if c > 0 else math.inf)
    ratios.sort()
    low, high = ratios[int(0.025 * len(ratios))], ratios[min(len(ratios) - 1, int(0.975 * len(ratios)))]
    bias = process_bias(reference, candidate)
    return min(low, low * bias), max(high, high * bias)


def process_bias(reference: Side, candidate: Side) -> float:
    """How much slower the reference model runs in the candidate's process than in its own (1.0: none seen)."""
    control, own = candidate.control(), reference.control()
    if not control or not own:
        return 1.0
    return statistics.median(control) / statistics.median(own)


def host_clock_speedup(reference: Side, candidate: Side) -> float:
    """The speedup the host's own clock implies (whole rounds, overheads included: biased towards 1)."""
    ref = statistics.median(r.window_ms / r.calls for r in reference.rounds)
    cand = statistics.median(r.window_ms / r.calls for r in candidate.rounds)
    return ref / cand if cand > 0 else math.inf
