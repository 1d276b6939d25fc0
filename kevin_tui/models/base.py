"""The streaming interface every backend implements, and what a finished reply looks like."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from kevin_tui.errors import KevinError

DEFAULT_MODEL = "cognition-ai/Kevin-32B"
# Kevin was evaluated at temperature 0.9 (QwQ's card suggests 0.6 / top_p 0.95 for the base model):
# Kevin's RL policy was trained and measured with the higher temperature, so that is the default.
DEFAULT_TEMPERATURE = 0.9
DEFAULT_TOP_P = 0.95
DEFAULT_MAX_TOKENS = 16384  # Kevin was trained with 16-22k token responses


class BackendError(KevinError):
    """The model could not be reached or failed; the message says what to do."""


# How a backend counts prompt tokens: with the model's tokenizer in-process, by asking the server
# (vLLM's /tokenize), or not at all (then prompts are estimated).
TokenCounting = Literal["model", "server", "none"]


@dataclass
class Sampling:
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_tokens: int = DEFAULT_MAX_TOKENS
    seed: int | None = None


@dataclass
class Delta:
    """A piece of the stream: reasoning or answer text as it arrives."""

    kind: Literal["reasoning", "answer"]
    text: str


@dataclass
class StreamEnd:
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    think_unclosed: bool = False  # only reasoning arrived: no `</think>`, or nothing after it (models/think.py)


@dataclass
class Reply:
    """A reply assembled from a stream; `complete` is False when it was stopped or failed midway."""

    reasoning: str = ""
    answer: str = ""
    end: StreamEnd = field(default_factory=StreamEnd)
    complete: bool = False

    def add(self, delta: Delta) -> None:
        if delta.kind == "reasoning":
            self.reasoning += delta.text
        else:
            self.answer += delta.text

    def finish(self, end: StreamEnd) -> None:
        """Close the reply. Output that never closed its reasoning stays reasoning, as vLLM's reasoning
        parser has it (models/think.py); parse_reply still finds a kernel written there."""
        self.end = end
        self.complete = True


class Backend(Protocol):
    name: str
    model: str
    token_counting: TokenCounting

    def stream(self, messages: list[dict[str, str]], sampling: Sampling) -> AsyncIterator[Delta | StreamEnd]:
        """Yield Deltas as they arrive, then one StreamEnd. Closing the iterator cancels generation."""
        ...

    def count_tokens(self, text: str) -> int | None:
        """Tokens in `text` by the model's tokenizer, or None when it cannot tell. May block (a
        request to the server): call it off the event loop."""
        ...

    async def aclose(self) -> None: ...


async def collect(stream: AsyncIterator[Delta | StreamEnd]) -> Reply:
    """Drain a stream into a Reply (for scripts and tests; the loop consumes streams itself)."""
    reply = Reply()
    async for item in stream:
        if isinstance(item, StreamEnd):
            reply.finish(item)
        else:
            reply.add(item)
    return reply
