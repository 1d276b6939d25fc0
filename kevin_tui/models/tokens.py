"""Counting prompt tokens the way the backend can, each text once.

Which way is the backend's declared capability (`token_counting`), not a probe: the model's own
tokenizer in-process, the server's /tokenize endpoint, or the estimate. Counting may block (a
request to the server), so callers count off the event loop; the budget loop counts the same text
more than once, and every trajectory's first prompt is the same, so counts are cached. A server
that turns out to have no /tokenize is asked once: the estimate is used from then on.
"""

from __future__ import annotations

import threading

from kevin_tui.models.base import Backend
from kevin_tui.protocol.prompt import estimate_tokens

CACHE_LIMIT = 256


class PromptTokens:
    """A thread-safe, caching token counter for one backend; call it with a text."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.uses_backend = backend.token_counting != "none"
        self._cache: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def counted_with(self) -> str:
        return f"{self.backend.name} tokenizer" if self.uses_backend else "estimate"

    def __call__(self, text: str) -> int:
        with self._lock:
            if text in self._cache:
                return self._cache[text]
        count = self.backend.count_tokens(text) if self.uses_backend else None
        if count is None:
            self.uses_backend = False  # the server cannot count: do not ask again
            count = estimate_tokens(text)
        with self._lock:
            if len(self._cache) >= CACHE_LIMIT:
                self._cache.clear()
            self._cache[text] = count
        return count
