"""Sharing the machine among many problems' trajectories: the gates batch mode gives its drivers.

- Generation: at most `concurrency` replies stream at once across all problems, from one backend
  (a vLLM server batches them).
- Builds: at most `build_jobs` kernels build at once, apart from checking and timing, so builds
  overlap other kernels' timing and the model's generation.
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
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, nullcontext

from kevin_tui.device_gate import DeviceGate
from kevin_tui.devices import resolve_device


def model_devices(backend_kind: str, tensor_parallel_size: int) -> set[str]:
    """The devices a model that kevin-tui runs here computes on (none for a server elsewhere)."""
    if backend_kind == "vllm":
        return {f"cuda:{i}" for i in range(tensor_parallel_size)}
    if backend_kind == "transformers":
        return {resolve_device("auto")}
    return set()


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

    def building(self) -> AbstractAsyncContextManager[None]:
        return nullcontext() if self.lanes.remote else self.lanes.builds

    def evaluating(self) -> AbstractAsyncContextManager[None]:
        return nullcontext() if self.lanes.remote else self.lanes.devices[self.device].evaluating()
