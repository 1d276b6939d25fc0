"""Sharing the machine between generating replies and judging kernels.

Kernels are evaluated one at a time (one reference worker; timings must not overlap). When the
model runs on this machine too (vLLM or transformers), an evaluation also waits for running
generations to finish and holds new ones back until it is done, so a kernel is never timed while
the model computes on the same device. Waiting evaluations go first, so they are never starved.

`Gate` is what the driver asks before each step of a turn; batch mode (kevin_tui.batch.scheduling)
has its own, which builds apart from checking and timing and shares limits across many problems.
Both keep one rule: a compiler never runs beside a kernel being judged on this machine (on 2 cores
a build beside a timing made an honest softmax look 9x slower to the host's clock, and rejected).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol


class Gate(Protocol):
    """When the driver may generate, build and evaluate."""

    separate_builds: bool  # build every kernel before its evaluation, even one alone (batch mode)

    def generating(self) -> AbstractAsyncContextManager[None]: ...

    def building(self) -> AbstractAsyncContextManager[None]: ...

    def evaluating(self) -> AbstractAsyncContextManager[None]: ...


class DeviceGate:
    """One problem's gate: builds take the evaluation's turn (on a CPU they would disturb timings)."""

    separate_builds = False

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

    def building(self) -> AbstractAsyncContextManager[None]:
        return self.evaluating()


class QuietForJudging:
    """Builds share the machine with one another, never with a kernel being judged: a judgement waits
    for the running builds to end and holds new ones back (it goes first, so it is never starved);
    builds wait while any judgement runs. Judgements on different devices may run together."""

    def __init__(self) -> None:
        self._changed = asyncio.Condition()
        self._building = 0
        self._judging = 0
        self._waiting = 0

    @asynccontextmanager
    async def building(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: not self._judging and not self._waiting)
            self._building += 1
        try:
            yield
        finally:
            async with self._changed:
                self._building -= 1
                self._changed.notify_all()

    @asynccontextmanager
    async def judging(self) -> AsyncIterator[None]:
        async with self._changed:
            self._waiting += 1
            try:
                await self._changed.wait_for(lambda: not self._building)
            finally:
                self._waiting -= 1
                self._changed.notify_all()
            self._judging += 1
        try:
            yield
        finally:
            async with self._changed:
                self._judging -= 1
                self._changed.notify_all()
