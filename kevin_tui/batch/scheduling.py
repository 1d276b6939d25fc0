"""Sharing the machine among many problems' trajectories: the gates batch mode gives its drivers.

- Generation: at most `concurrency` replies stream at once across all problems, from one backend
  (a vLLM server batches them).
- Builds: at most `build_jobs` kernels build at once, apart from checking and timing, so builds
  overlap the model's generation, but never a kernel being checked or timed here
  (kevin_tui.device_gate.QuietForJudging: the same rule as one problem's DeviceGate).
- Evaluation: one kernel at a time per evaluation device (its checks and timing). Each problem is
  placed on the device with the fewest open problems, where its reference worker runs.
- A device the model runs on (a vLLM server or a transformers model that kevin-tui started here)
  times nothing while the model generates unless the user allows it: its DeviceGate is exclusive,
  and every generation passes through it.

With Ray (kevin_tui.batch.remote), each evaluation is a Ray task that Ray places on a node with a
free device, builds included: only generation is limited here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from kevin_tui.device_gate import DeviceGate, QuietForJudging


class Lanes:
    """The run's shared limits, and which device each open problem evaluates on."""

    def __init__(
        self, concurrency: int, build_jobs: int, devices: list[str], shared: set[str], remote: bool = False
    ) -> None:
        """`shared`: the evaluation devices the model also computes on, where nothing may be timed
        while it generates."""
        self.generation = asyncio.Semaphore(concurrency)
        self.builds = asyncio.Semaphore(build_jobs)
        self.devices = {d: DeviceGate(exclusive=d in shared) for d in devices}
        self.quiet = QuietForJudging()
        self.open = dict.fromkeys(devices, 0)
        self.remote = remote

    def place(self) -> str:
        """The device with the fewest open problems (the first such, in the order given)."""
        device = min(self.open, key=self.open.__getitem__)
        self.open[device] += 1
        return device

    def release(self, device: str) -> None:
        self.open[device] -= 1

    def gate(self, device: str) -> BatchGate:
        return BatchGate(self, device)


class BatchGate:
    """The gate of one problem's drivers (kevin_tui.device_gate.Gate)."""

    def __init__(self, lanes: Lanes, device: str) -> None:
        self.lanes = lanes
        self.device = device
        self.separate_builds = not lanes.remote  # remotely, a Ray task builds what it evaluates

    @asynccontextmanager
    async def generating(self) -> AsyncIterator[None]:
        async with self.lanes.generation, AsyncExitStack() as stack:
            for gate in self.lanes.devices.values():
                if gate.exclusive:
                    await stack.enter_async_context(gate.generating())
            yield

    @asynccontextmanager
    async def building(self) -> AsyncIterator[None]:
        if self.lanes.remote:
            yield
            return
        async with self.lanes.builds, self.lanes.quiet.building():
            yield

    @asynccontextmanager
    async def evaluating(self) -> AsyncIterator[None]:
        if self.lanes.remote:
            yield
            return
        async with self.lanes.devices[self.device].evaluating(), self.lanes.quiet.judging():
            yield
