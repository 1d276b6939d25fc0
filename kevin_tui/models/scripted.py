"""Replies from a file, streamed as if a model wrote them: for demos, tests and reproducible sessions.

The script is a JSON list of {"reasoning": ..., "answer": ...}; each request takes the next one
(the last repeats). Text is streamed in small chunks at `--script-rate` chunks per second, after
`--script-delay` seconds (a fixed generation time, for benchmarks).

When requests run concurrently (batch mode), their order says nothing, so a reply may instead say
which prompts it answers: `"when": [texts]` the prompt must all contain. A request gets the entry
whose `when` matches the most texts; among equally good ones, the one a sampling seed picks
(seed mod their number), else the n-th request with the same prompt gets the n-th (as sampling the
same prompt twice gives two replies). Which reply a prompt gets then depends on the prompt (and
the seed) alone, whatever the order.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

from kevin_tui.models.base import BackendError, Delta, Sampling, StreamEnd, TokenCounting

CHUNK_CHARS = 12


class ScriptedBackend:
    name = "scripted"
    token_counting: TokenCounting = "none"

    def __init__(self, script: Path, rate: float = 0.0, delay: float = 0.0) -> None:
        try:
            replies = json.loads(Path(script).read_text())
        except (OSError, ValueError) as exc:
            raise BackendError(f"cannot read the reply script {script}: {exc}") from None
        if not isinstance(replies, list) or not replies or not all(isinstance(r, dict) for r in replies):
            raise BackendError(f"{script}: expected a JSON list of {{reasoning, answer}} replies")
        for reply in replies:
            when = reply.get("when", [])
            reply["when"] = [when] if isinstance(when, str) else when
            if not all(isinstance(text, str) for text in reply["when"]):
                raise BackendError(f"{script}: 'when' must be a text or a list of texts")
        self.replies = replies
        self.keyed = any(r["when"] for r in replies)
        self.model = f"scripted:{Path(script).name}"
        self.rate = rate
        self.delay = delay
        self.calls = 0
        self._asked: dict[str, int] = {}  # keyed scripts: how often each prompt was asked

    def _pick(self, messages: list[dict[str, str]], seed: int | None) -> dict:
        if not self.keyed:
            return self.replies[min(self.calls, len(self.replies) - 1)]
        prompt = "\n".join(m["content"] for m in messages)
        matching = [r for r in self.replies if all(text in prompt for text in r["when"])]
        if not matching:
            raise BackendError("no scripted reply's 'when' matches this prompt")
        most = max(len(r["when"]) for r in matching)
        best = [r for r in matching if len(r["when"]) == most]
        asked = self._asked.get(prompt, 0)
        self._asked[prompt] = asked + 1
        return best[(asked if seed is None else seed) % len(best)]

    async def stream(self, messages: list[dict[str, str]], sampling: Sampling) -> AsyncIterator[Delta | StreamEnd]:
        reply = self._pick(messages, sampling.seed)
        self.calls += 1
        await asyncio.sleep(self.delay)
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
