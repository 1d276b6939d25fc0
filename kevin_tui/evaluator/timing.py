"""Timing one forward call, the same way for the reference and the candidate.

CPU: wall clock around each call. CUDA: events around each call on a
synchronised device with the L2 cache flushed before it, plus a wall-clock
time that includes a device-wide synchronise: a candidate that hides work on
another stream finishes its events early but not the device, and the gap shows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kevin_tui.evaluator.verdict import Timing


@dataclass
class TimingPlan:
    warmup: int = 3
    min_trials: int = 10
    max_trials: int = 1000
    min_seconds: float = 0.5
    max_seconds: float = 10.0

    @classmethod
    def for_device(cls, device: str, trials: int | None = None) -> TimingPlan:
        plan = cls(warmup=10, min_trials=100) if device.startswith("cuda") else cls()
        if trials:
            plan.min_trials = plan.max_trials = trials
        return plan


def _enough(plan: TimingPlan, count: int, elapsed: float) -> bool:
    if count >= plan.max_trials or (count >= plan.min_trials and elapsed >= plan.min_seconds):
        return True
    return count >= max(3, plan.min_trials // 10) and elapsed >= plan.max_seconds


def time_cpu(fn: Callable[[], Any], plan: TimingPlan) -> dict[str, Timing]:
    for _ in range(plan.warmup):
        fn()
    samples: list[float] = []
    start = time.perf_counter()
    while not _enough(plan, len(samples), time.perf_counter() - start):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return {"wall": Timing.from_samples(samples, "wall clock")}


def time_cuda(fn: Callable[[], Any], plan: TimingPlan, device: str) -> dict[str, Timing]:
    import torch

    props = torch.cuda.get_device_properties(device)
    flush = torch.empty(max(2 * props.L2_cache_size, 64 << 20), dtype=torch.uint8, device=device)
    for _ in range(plan.warmup):
        fn()
    torch.cuda.synchronize(device)
    events: list[float] = []
    walls: list[float] = []
    start = time.perf_counter()
    while not _enough(plan, len(events), time.perf_counter() - start):
        flush.zero_()
        torch.cuda.synchronize(device)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize(device)
        walls.append((time.perf_counter() - t0) * 1e3)
        events.append(begin.elapsed_time(end))
    return {
        "events": Timing.from_samples(events, "CUDA events, L2 flushed"),
        "synced_wall": Timing.from_samples(walls, "wall clock with device-wide sync"),
    }


def time_call(fn: Callable[[], Any], plan: TimingPlan, device: str) -> dict[str, Timing]:
    if device.startswith("cuda"):
        return time_cuda(fn, plan, device)
    return time_cpu(fn, plan)


def primary(timings: dict[str, Timing]) -> Timing:
    return timings.get("events") or timings["wall"]
