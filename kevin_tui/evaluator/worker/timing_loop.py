"""One timing round, run the same way for the reference and the candidate.

The host sends rounds to the two workers in turn and measures each with its own clock; this is the
loop inside one worker. Each call gets the next inputs from the pool (no two calls see the same
input), and its output is copied at once into a slot kept for the round, so the host can ask for any
call's output afterwards: what the call returned, at the moment it returned. The slots are reused from
round to round, so the timed calls see the same allocator state on both sides.
CPU: wall clock around each call. CUDA: events around each call on a synchronised device with the
L2 cache flushed before it, plus a wall-clock time that includes a device-wide synchronise (work
hidden on another stream finishes its events early but not the device, and the gap shows).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from kevin_tui.evaluator.worker.capture import no_modes, snapshot
from kevin_tui.evaluator.worker.inputs import Pool


def fits(slot: Any, out: Any) -> bool:
    """`out` has exactly the structure, shapes, dtypes and devices of `slot` (plain tensors only)."""
    if type(out) is torch.Tensor:
        return (type(slot) is torch.Tensor and slot.shape == out.shape and slot.dtype == out.dtype
                and slot.device == out.device)  # fmt: skip
    if type(out) in (tuple, list):
        return type(slot) is type(out) and len(slot) == len(out) and all(map(fits, slot, out))
    return False


def copy_into(slot: Any, out: Any) -> None:
    if type(out) is torch.Tensor:
        slot.copy_(out.detach())
    else:
        for s, o in zip(slot, out, strict=True):
            copy_into(s, o)


class Timer:
    """Runs rounds of calls of `fn` on a pool's inputs; keeps the last round's outputs for the judge.

    With a `control` (the reference model, in the candidate's process), each call of `fn` is followed
    by one of the control on the same inputs: how fast the reference runs in this process, compared
    with its own worker, shows how much the two processes differ by themselves."""

    def __init__(
        self, fn: Callable[[list[Any]], Any], pool: Pool, device: str, control: Callable[[list[Any]], Any] | None = None
    ) -> None:
        self.fn, self.pool, self.device, self.control = fn, pool, device, control
        self.outputs: list[Any] = []  # one slot per call of the round
        self.control_ms: list[float] = []
        self.flush = None
        if device.startswith("cuda"):
            size = max(2 * torch.cuda.get_device_properties(device).L2_cache_size, 64 << 20)
            self.flush = torch.empty(size, dtype=torch.uint8, device=device)

    def round(self, calls: int) -> tuple[list[float], list[float] | None]:
        """(per-call ms, per-call device-synced ms or None on the CPU) for `calls` calls."""
        self.control_ms = []
        samples: list[float] = []
        synced: list[float] = []
        with torch.no_grad():
            for index in range(calls):
                args = self.pool.next_args()
                out = self._call(self.fn, args, samples, synced)
                with no_modes():
                    self.keep(index, out)
                del out
                if self.control is not None:  # always after: the timed call never finds its inputs warmed by it
                    self._call(self.control, args, self.control_ms, [])
        del self.outputs[calls:]
        return samples, (synced if self.flush is not None else None)

    def keep(self, index: int, out: Any) -> None:
        """Copy `out` into slot `index` (made by the first round that needs it, reused after)."""
        if index < len(self.outputs) and fits(self.outputs[index], out):
            copy_into(self.outputs[index], out)
        elif index < len(self.outputs):
            self.outputs[index] = snapshot(out)
        else:
            self.outputs.append(snapshot(out))

    def _call(self, fn: Callable[[list[Any]], Any], args: list[Any], samples: list[float], synced: list[float]) -> Any:
        if self.flush is None:
            start = time.perf_counter()
            out = fn(args)
            samples.append((time.perf_counter() - start) * 1e3)
            return out
        self.flush.zero_()
        torch.cuda.synchronize(self.device)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start = time.perf_counter()
        begin.record()
        out = fn(args)
        end.record()
        torch.cuda.synchronize(self.device)
        synced.append((time.perf_counter() - start) * 1e3)
        samples.append(begin.elapsed_time(end))
        return out
