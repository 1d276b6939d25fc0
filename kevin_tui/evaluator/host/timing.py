"""Timing in interleaved rounds, decided by the host's clock, with an interval on the speedup.

The reference and the candidate are timed in alternating rounds, in an order the host draws from its
own secret each round, so whatever else the machine is doing lands on both. Every round has its own
seed, sent with the command, from which every call draws a fresh sample of the problem's inputs
inside the round (see worker/inputs.py), and every call's output is committed to the reference worker
before the host asks it to judge them; every timed output is judged.

The speedup is the host's: each side's round time per call (the host's clock from the command to the
reply), less the reference worker's own loop overhead (the median, over rounds, of its round time
outside the calls it reported: drawing each call's inputs, keeping its output, the command itself;
that worker is trusted and runs the very same loop on the very same inputs). Whatever the candidate
does inside its round, in the call, in the loop (its drawing included) or in a thread, is charged; its own
per-call times are detail, and times much shorter than the host's clock saw are refused as forged.
The interval comes from a bootstrap over paired rounds. Two processes also differ by themselves (where
their memory landed, their caches): the candidate's worker also runs the reference model over the
same loop in a control round, timed by the host, and the interval is widened to cover the speedup
the ratio of that round to the reference's own implies, and, where the control was faster, that gain as
time added to the candidate's (the speedup is taken after the loop's overhead: a process that runs the
loop faster gains far more than the ratio of whole rounds says). A candidate that tampers with its control can
only widen its own interval; the headline speedup stays inside the interval and is 1.0 whenever the
interval holds 1.0 (a speedup the host's clock does not confirm is not shown as one).
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
OUTPUT_BYTES_PER_ROUND = 16 << 20  # the round's outputs, kept until judged: more, and the allocator behaves differently
BOOTSTRAP_RESAMPLES = 1000
# Time outside the reported calls may exceed the reference's own loop overhead by this share of the
# candidate's reported per-call time plus this share of that overhead, scaled by how much slower the
# candidate's process ran the reference's own model (the processes' allocators, caches and scheduling
# differ; on a loaded machine a short kernel's loop took 2.4x the reference's), before the reported times
# are refused as forged. No fixed floor: both scale with the work. The speedup never rests on these times
# (the host's clock decides it), so the check only names a lie and must never reject honest bookkeeping.
EXCESS_SHARE = 0.5
OVERHEAD_SHARE = 2.0
# The reference model timed in the candidate's process may not run this much faster than in its own worker.
MIN_PROCESS_BIAS = 0.2
# A candidate's processes may use this many times the CPU time its thread count allows over a round before
# the verdict says so (its own threads are allowed; more cores than the reference had is worth knowing).
CPU_SHARE_WARNING = 1.5
LEAST_MS = 1e-9
# The candidate's warm-up sets the calls a round only while its main rounds bear it out: where they ran this many
# times more calls a round's length than it said, the measurement is taken again at the calls they imply.
SCHEDULE_SLACK = 2.0


@dataclass
class TimingPlan:
    rounds: int
    warmup_calls: int = 3
    fixed_calls: int | None = None  # from --timing-trials: calls per round, not adapted

    @classmethod
    def for_device(cls, device: str, timing_trials: int | None = None) -> TimingPlan:
        rounds = CUDA_ROUNDS if device.startswith("cuda") else CPU_ROUNDS
        if timing_trials:  # about that many calls in all, never fewer than 3 per round nor 3 rounds
            calls = max(MIN_CALLS, math.ceil(timing_trials / rounds))
            return cls(max(3, min(rounds, math.ceil(timing_trials / calls))), fixed_calls=calls)
        return cls(rounds)

    def calls_per_round(self, device: str, per_call_ms: float, output_bytes: int) -> int:
        """Enough calls for a round to last ~30 ms (CPU) / 10 ms (CUDA) at `per_call_ms` (a call and the loop's
        work around it, on the host's clock), within the memory for outputs; with
        --timing-trials, that many but never a round shorter than a third of that (the host's clock times
        whole rounds: a round of a few short calls would be mostly the command's own latency)."""
        target = CUDA_ROUND_S if device.startswith("cuda") else CPU_ROUND_S
        if self.fixed_calls:
            target /= 3
        calls = max(math.ceil(target * 1e3 / max(per_call_ms, 1e-3)), self.fixed_calls or 0)
        by_memory = max(1, OUTPUT_BYTES_PER_ROUND // max(1, output_bytes))
        return max(MIN_CALLS, min(MAX_CALLS, calls, by_memory))


def misled_schedule(
    plan: TimingPlan,
    device: str,
    output_bytes: int,
    calls: int,
    trusted_ms: float,
    candidate: Side,
    fixed_ms: float = 0.0,
) -> int | None:
    """The calls a round should have had, where the candidate's warm-up set fewer than its main rounds bear out
    (more than SCHEDULE_SLACK times fewer); else None. `trusted_ms`: the slowest reference side's warm-up per call
    (its loop included). The warm-up is the candidate's own word on its speed: one made slow (a sleep in the three
    calls it can tell from the rest) set three calls a round, and the least time the host then tells from loop work
    skipped (tripwire_floor: the tripwires' time per call, a third of RoundWatch's in each) was as long as most
    short kernels, so a kernel slower than the reference read "no measurable difference" at that floor. Its main
    rounds can only say it is slower than it is by being slower: the time it is charged. `fixed_ms`: the reference's
    tripwires' time a round, taken out of its rounds' time per call as out of the warm-up's."""
    if not candidate.rounds:
        return None
    ran_ms = statistics.median(max(0.0, r.window_ms - fixed_ms) / r.calls for r in candidate.rounds)
    planned = plan.calls_per_round(device, max(trusted_ms, ran_ms), output_bytes)
    return planned if planned > SCHEDULE_SLACK * calls else None


@dataclass
class Round:
    """One side's round: what the worker reported and what the host's clock saw."""

    samples_ms: list[float]
    synced_ms: list[float] | None
    window_ms: float  # host clock, from the command to the reply
    cpu_s: float | None = None  # CPU time the worker's processes used in the window (host-read)
    threads: int = 1  # the threads the worker was given
    tripwires_ms: float | None = None  # the reference's: its time in the round's tripwires (tripwire_floor)

    @property
    def calls(self) -> int:
        return len(self.samples_ms)

    @property
    def charged_ms(self) -> float:
        """The round's time on the host's clock, but never less than the CPU time its processes used spread
        over the threads they were given: work done on spare cores beside the loop (drawing the next call's
        inputs while this one computes) is charged as if it had waited its turn."""
        if self.cpu_s is None:
            return self.window_ms
        return max(self.window_ms, self.cpu_s * 1e3 / self.threads)

    @property
    def reported_ms(self) -> float:
        """The worker's own wall-clock time of its calls (device-synced on CUDA)."""
        return sum(self.synced_ms if self.synced_ms is not None else self.samples_ms)

    @property
    def host_per_call_ms(self) -> float:
        return self.charged_ms / self.calls

    @property
    def outside_ms_per_call(self) -> float:
        """Wall-clock time per call outside the reported calls (what the clock check compares: CPU time
        spent on more cores than given is charged to the speedup, not taken for a forged report)."""
        return max(0.0, self.window_ms - self.reported_ms) / self.calls


@dataclass
class Side:
    rounds: list[Round] = field(default_factory=list)
    controls: list[Round] = field(default_factory=list)  # the reference model in the candidate's process

    def samples(self) -> list[float]:
        return [s for r in self.rounds for s in r.samples_ms]

    def synced(self) -> list[float]:
        return [s for r in self.rounds for s in (r.synced_ms or [])]

    def host_ms(self, overhead_ms: float, floor_ms: float = 0.0) -> list[float]:
        """Per round: the host's time per call, less the reference's own loop overhead (never below `floor_ms`)."""
        return [max(r.host_per_call_ms - overhead_ms, min(r.reported_ms / r.calls, r.host_per_call_ms), floor_ms,
                    LEAST_MS) for r in self.rounds]  # fmt: skip

    def timings(self, device: str) -> dict[str, Timing]:
        if device.startswith("cuda"):
            return {
                "events": Timing.from_samples(self.samples(), "CUDA events, L2 flushed (the worker's own clock)"),
                "synced_wall": Timing.from_samples(self.synced(), "wall clock with device-wide sync (the worker's)"),
            }
        return {"wall": Timing.from_samples(self.samples(), "wall clock per call (the worker's own clock)")}


def loop_overhead(reference: Side, picks: list[int] | None = None) -> float:
    """The reference worker's time per call outside its calls (median over rounds): the loop's own cost."""
    rounds = reference.rounds if picks is None else [reference.rounds[i] for i in picks]
    return statistics.median(r.outside_ms_per_call for r in rounds)


def tripwire_floor(reference: Side, picks: list[int] | None = None) -> float:
    """The least time per call the host's clock can tell from loop work skipped: the reference's own time per call
    in its tripwires (the aliases check after each call, the round's RoundWatch: median over rounds), which it
    runs, as an honest candidate does, and which the host subtracts as the loop's overhead. A candidate can skip
    them in its own process (replacing `Timer.round.__code__` keeps the function's identity), so below that time
    what the host's clock leaves of a short kernel is work skipped as much as work done, and the floor was the
    candidate's own report: an identical 64K ReLU that skipped them and reported 0 ms read 13,885,833x
    (tests/candidates/redteam31/). Both sides get this floor: a kernel faster than it reads as fast as it, not
    faster (0 where the reference did not report its tripwires' time)."""
    rounds = reference.rounds if picks is None else [reference.rounds[i] for i in picks]
    times = [r.tripwires_ms / r.calls for r in rounds if r.tripwires_ms is not None]
    return statistics.median(times) if times and len(times) == len(rounds) else 0.0


def per_call_ms(side: Side, overhead_ms: float, picks: list[int] | None = None, floor: float = 0.0) -> float:
    """A side's time per call on the host's clock (median round), less the reference loop's overhead; never
    below what the side itself reported (capped at what the host saw), nor below `floor` (tripwire_floor). On a
    busy machine the overhead can swallow a short kernel's whole time; the side's own figure can only raise its
    time, never lower it."""
    rounds = side.rounds if picks is None else [side.rounds[i] for i in picks]
    host = statistics.median(r.host_per_call_ms for r in rounds)
    reported = min(statistics.median(r.reported_ms / r.calls for r in rounds), host)
    return max(host - overhead_ms, reported, floor, LEAST_MS)


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
                f"the reference model ran {1 / self.process_bias:.1f}x faster in the candidate's process than in "
                "the reference's own worker, on the host's clock: that process's control cannot be trusted"
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
    bias = process_bias(reference, candidate)  # the host's clock on both: slowing the control only widens the interval
    ref_outside = min(r.outside_ms_per_call for r in reference.rounds)
    per_call = statistics.median(candidate.samples())
    return ClockCheck(
        per_call_ms=per_call,
        host_per_call_ms=statistics.median(r.window_ms / r.calls for r in candidate.rounds),
        outside_ms=min(r.outside_ms_per_call for r in candidate.rounds),
        reference_outside_ms=ref_outside,
        allowed_ms=EXCESS_SHARE * per_call + OVERHEAD_SHARE * ref_outside * max(1.0, bias),
        process_bias=bias,
    )


def host_speedup(
    reference: Side,
    candidate: Side,
    picks: list[int] | None = None,
    slack_ms: float = 0.0,
    baseline: Side | None = None,
) -> float:
    """`slack_ms`: time per call the candidate's rounds may be understated by (added to its time); `baseline`: the
    side the speedup is over (the reference under torch.compile), where not `reference`, whose loop overhead it is."""
    overhead, floor = loop_overhead(reference, picks), tripwire_floor(reference, picks)
    return per_call_ms(baseline or reference, overhead, picks, floor) / (
        per_call_ms(candidate, overhead, picks, floor) + slack_ms
    )


def process_gap_ms(reference: Side, candidate: Side, picks: list[int] | None = None) -> float:
    """How much less time per call (host clock, median round) the candidate's process took for the reference's
    own model over the same loop than the reference's worker did: time the candidate's own rounds may be short
    by, whatever its process did to run the shared loop (or anything else) faster. 0 when it was not faster."""
    if not candidate.controls or not reference.rounds:
        return 0.0
    picks = list(range(min(len(reference.rounds), len(candidate.controls)))) if picks is None else picks
    control = statistics.median(candidate.controls[i].host_per_call_ms for i in picks)
    own = statistics.median(reference.rounds[i].host_per_call_ms for i in picks)
    return max(0.0, own - control)


def speedup_interval(
    reference: Side, candidate: Side, seed: int = 0, baseline: Side | None = None
) -> tuple[float, float]:
    """95% bootstrap interval of the host-clock speedup, resampling paired rounds, widened to cover the
    process difference the control rounds measured: as a ratio of whole rounds (`process_bias`), and, at the
    low end, as time: the control's gain per call added to the candidate's time. The speedup is taken after the
    loop's overhead is subtracted, so a process that runs the shared loop faster gains far more than the ratio of
    whole rounds shows (a candidate that made its allocations fault-free: rounds 0.3x the reference's own, a 1x
    ReLU at 6.8x whose interval, widened by that ratio only, stayed above 1.5). `baseline`: the interval of the speedup
    over that side (the reference under torch.compile, timed in the same rounds), widened by the same control: what
    the candidate's process gains it gains over either."""
    rng = random.Random(seed)
    n = len(reference.rounds)
    plain, slack = [], []
    for _ in range(BOOTSTRAP_RESAMPLES):
        picks = [rng.randrange(n) for _ in range(n)]
        plain.append(host_speedup(reference, candidate, picks, baseline=baseline))
        gap = process_gap_ms(reference, candidate, picks)
        slack.append(host_speedup(reference, candidate, picks, gap, baseline))
    plain.sort()
    slack.sort()
    low, high = plain[int(0.025 * len(plain))], plain[min(len(plain) - 1, int(0.975 * len(plain)))]
    bias = process_bias(reference, candidate)
    return min(low, low * bias, slack[int(0.025 * len(slack))]), max(high, high * bias)


def outward(interval: tuple[float, float], digits: int = 4) -> tuple[float, float]:
    """The interval rounded for the record without narrowing it: the low bound down, the high bound up."""
    scale = 10**digits
    return math.floor(interval[0] * scale) / scale, math.ceil(interval[1] * scale) / scale


def headline(point: float, interval: tuple[float, float]) -> float:
    """The speedup to report and rank by: the point estimate kept inside the (widened) interval, and at most
    1.0 when the interval holds 1.0. Widening (noise, a control the candidate slowed in its own process) only
    ever lowers it: a kernel measured at 0.5x reads 0.5x, never "1.0" for being noisy."""
    low, high = interval
    inside = min(max(point, low), high)
    return min(inside, 1.0) if low <= 1.0 <= high else inside


def process_bias(reference: Side, candidate: Side) -> float:
    """How much slower the reference model runs in the candidate's process than in its own, on the host's
    clock over the same loop (1.0: none seen)."""
    if not candidate.controls or not reference.rounds:
        return 1.0
    control = statistics.median(r.host_per_call_ms for r in candidate.controls)
    own = statistics.median(r.host_per_call_ms for r in reference.rounds)
    return control / own if own > 0 else 1.0


def cpu_share(candidate: Side, threads: int) -> float | None:
    """The most CPU time the candidate's processes used per second of a round, per thread it was given."""
    shares = [r.cpu_s / (r.window_ms / 1e3) / threads for r in candidate.rounds if r.cpu_s is not None and r.window_ms]
    return max(shares) if shares else None
