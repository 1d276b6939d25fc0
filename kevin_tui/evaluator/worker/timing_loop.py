"""One timing round, run the same way for the reference and the candidate.

The host sends rounds to the workers in turn and measures each with its own clock; this is the loop
inside one worker. The round's seed, sent with the command, decides every call's inputs: each call draws
a fresh sample (`TimedInputs`) just before it, inside the round the host times, so nothing about them
is known before the round begins and drawing is the same loop work for both sides. Every call's
output is kept as it was returned and all of them are written to one file before the reply: the host
takes that file out of the worker's reach and has the reference worker read it and judge every one of
them against its own output for the same inputs, so no answer can be changed once the round is over,
and one output buffer reused by later calls shows their values, not its call's. The round's tripwires
(`RoundWatch`) end it, in both workers, and nothing of the round is left for after the reply (the host
removes the round's file): the host stops the candidate on its reply, so whatever it did after the reply
landed in its next window, which the reference's does not have. CPU: wall clock around each call. CUDA:
events around each call on a synchronised device with the L2 cache flushed before it, plus a wall-
clock time that includes a device-wide synchronise. These per-call times are the worker's word only:
the speedup comes from the host's clock over the whole round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kevin_tui.evaluator.worker import tensorfile
from kevin_tui.evaluator.worker.capture import aliases, any_mode, no_modes
from kevin_tui.evaluator.worker.guards import RoundWatch
from kevin_tui.evaluator.worker.inputs import TimedInputs


class Timer:
    """Runs rounds of calls of `fn` (or of `control`, the reference model in the candidate's process) on
    fresh inputs; keeps the last main round's outputs, for the judge on the reference's side. `watch`: the
    tripwires every round ends with (the candidate's, made before it was imported; the reference's own)."""

    def __init__(
        self,
        fn: Callable[[list[Any]], Any],
        inputs: TimedInputs,
        device: str,
        watch: RoundWatch,
        control: Callable[[list[Any]], Any] | None = None,
    ) -> None:
        self.fn, self.inputs, self.device, self.watch, self.control = fn, inputs, device, watch, control
        self.outputs: list[Any] = []  # the last main round's outputs, as returned
        self.shared_memory = 0  # calls whose output shared memory with their inputs (the candidate's tripwire)
        self.found: tuple[list[str], list[str]] = ([], [])  # the last round's RoundWatch.check()
        # the last round's time in its tripwires (the aliases check of its first call, RoundWatch): loop work a
        # candidate can skip in its own process, which the reference's reply reports (host/timing.py tripwire_floor).
        # The aliases check ran after every call, ~13 us of it under no_modes: as the floor, as long as a short kernel
        self.tripwires_ms = 0.0
        self.flush = None
        if device.startswith("cuda"):
            size = max(2 * torch.cuda.get_device_properties(device).L2_cache_size, 64 << 20)
            self.flush = torch.empty(size, dtype=torch.uint8, device=device)

    def round(
        self, calls: int, seed: int, path: Path, control: bool = False, watch: bool = True
    ) -> tuple[list[float], list[float] | None]:
        """(per-call ms, per-call device-synced ms or None on the CPU); every output written to `path`. `watch`: run
        RoundWatch at its end (~0.2 ms: the host names the rounds that do, the same for both workers, so most rounds
        hold little tripwire time a candidate could skip; host/timing.py tripwire_floor)."""
        fn = self.control if control else self.fn
        if fn is None:
            raise ValueError("this timer has no control")
        samples: list[float] = []
        synced: list[float] = []
        outputs: list[Any] = []
        self.outputs, self.shared_memory = [], 0  # the last round's outputs go before this one allocates
        tripwires = 0.0
        with torch.no_grad():
            for index in range(calls):
                args = self.inputs.args(seed, index)
                out = self._call(fn, args, samples, synced)
                if index == 0:  # one call a round (sharing memory with its inputs is a kernel's way, call after call)
                    checked = time.perf_counter()
                    if any_mode():
                        with no_modes():
                            self.shared_memory += bool(aliases(out, args, []))
                    else:  # no_modes alone is ~6 us
                        self.shared_memory += bool(aliases(out, args, []))
                    tripwires += time.perf_counter() - checked
                outputs.append(out)
                del args, out
            with no_modes():
                tensorfile.write(path, outputs)
        if not control:
            self.outputs = outputs
        checked = time.perf_counter()
        self.found = self.watch.check() if watch else ([], [])
        self.tripwires_ms = (tripwires + time.perf_counter() - checked) * 1e3
        return samples, (synced if self.flush is not None else None)

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
