"""Replies from a file, streamed as if a model wrote them: for demos, tests and reproducible sessions.

The script is a JSON list of {"reasoning": ..., "answer": ...}; each request takes the next one
(the last repeats). Text is streamed in small chunks at `--script-rate` chunks per second.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

from kevin_tui.models.base import BackendError, Delta, Sampling, StreamEnd

CHUNK_CHARS = 12


class ScriptedBackend:
    name = "scripted"
    token_counting = "none"

    def __init__(self, script: Path, rate: float = 0.0) -> None:
        try:
            replies = json.loads(Path(script).read_text())
        except (OSError, ValueError) as exc:
            raise BackendError(f"cannot read the reply script {script}: {exc}") from None
        if not isinstance(replies, list) or not replies:
            raise BackendError(f"{script}: expected a JSON list of {{reasoning, answer}} replies")
        self.replies = replies
        self.model = f"scripted:{Path(script).name}"
        self.rate = rate
        self.calls = 0

    async def stream(self, messages: list[dict[str, str]], sampling: Sampling) -> AsyncIterator[Delta | StreamEnd]:
        reply = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        produced = 0
        started = time.monotonic()
        for kind in ("reasoning", "answer"):
            text = reply.get(kind, "")
            for start in range(0, len(text), CHUNK_CHARS):
                # paced by schedule, not by sleeping a fixed time, so the rate holds under load
                delay = started + produced / self.rate - time.monotonic() if self.rate else 0.0
                await asyncio.sleep(max(0.0, delay))
                produced += 1
                yield Delta(kind, text[start : start + CHUNK_CHARS])
        prompt_chars = sum(len(m["content"]) for m in messages)
        yield StreamEnd("stop", prompt_chars // 4, produced * CHUNK_CHARS // 4)

    def count_tokens(self, text: str) -> int | None:
        return None

    async def aclose(self) -> None:
        return None
