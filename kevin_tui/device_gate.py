"""Sharing the machine between generating replies and judging kernels.

Kernels are evaluated one at a time (one reference worker; timings must not overlap). When the
model runs on this machine too (vLLM or transformers), an evaluation also waits for running
generations to finish and holds new ones back until it is done, so a kernel is never timed while
the model computes on the same device. Waiting evaluations go first, so they are never starved.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class DeviceGate:
    def __init__(self, exclusive: bool) -> None:
        self.exclusive = exclusive
        self._changed = asyncio.Condition()
        self._generating = 0
        self._evaluating = False
        self._waiting = 0

    @asynccontextmanager
    async def generating(self) -> AsyncIterator[None]:
        async with self._changed:
            if self.exclusive:
                await self._changed.wait_for(lambda: not self._evaluating and not self._waiting)
            self._generating += 1
        try:
            yield
        finally:
            async with self._changed:
                self._generating -= 1
                self._changed.notify_all()

    @asynccontextmanager
    async def evaluating(self) -> AsyncIterator[None]:
        async with self._changed:
            self._waiting += 1
            try:
                await self._changed.wait_for(
                    lambda: not self._evaluating and (not self.exclusive or not self._generating)
                )
            finally:
                self._waiting -= 1
                self._changed.notify_all()  # held-back generations may go if this one gave up
            self._evaluating = True
        try:
            yield
        finally:
            async with self._changed:
                self._evaluating = False
                self._changed.notify_all()
