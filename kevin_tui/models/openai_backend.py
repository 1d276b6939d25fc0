"""Any OpenAI-compatible server: a remote `vllm serve` (tensor/pipeline parallel), SGLang,
`transformers serve`, or the vLLM server kevin-tui manages itself.

The API key comes from an environment variable (KEVIN_TUI_API_KEY, else OPENAI_API_KEY) and is
never logged, saved or shown.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from kevin_tui.models.base import BackendError, Delta, Sampling, StreamEnd, TokenCounting
from kevin_tui.models.http import post_json
from kevin_tui.models.think import ThinkSplitter

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

API_KEY_VARIABLES = ("KEVIN_TUI_API_KEY", "OPENAI_API_KEY")


def api_base(server: str) -> str:
    server = server.rstrip("/")
    return server if server.endswith("/v1") else f"{server}/v1"


def api_key() -> str:
    for name in API_KEY_VARIABLES:
        if value := os.environ.get(name):
            return value
    return "not-needed"  # local servers ignore it; the client library insists on one


def _reasoning_of(delta: Any) -> str | None:
    extra = getattr(delta, "model_extra", None) or {}
    return getattr(delta, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning")


class OpenAIBackend:
    name = "openai"
    token_counting: TokenCounting = "server"  # vLLM's /tokenize; a server without it falls back to the estimate

    def __init__(self, server: str, model: str, starts_in_reasoning: bool = True, timeout_s: float = 600.0) -> None:
        try:
            import openai
        except ImportError:
            raise BackendError("the openai package is missing: pip install openai") from None
        self.server = server
        self.model = model
        self.starts_in_reasoning = starts_in_reasoning
        self._openai = openai
        self.client = openai.AsyncOpenAI(base_url=api_base(server), api_key=api_key(), timeout=timeout_s, max_retries=0)

    def _error(self, exc: Exception) -> BackendError:
        openai = self._openai
        if isinstance(exc, openai.APIConnectionError):
            return BackendError(f"cannot reach the model server at {self.server}: {exc.__cause__ or exc}")
        if isinstance(exc, openai.NotFoundError):
            return BackendError(f"the server at {self.server} does not serve model {self.model!r} ({exc.message})")
        if isinstance(exc, openai.APIStatusError):
            return BackendError(f"the server at {self.server} answered {exc.status_code}: {exc.message}")
        return BackendError(f"the stream from {self.server} broke off: {type(exc).__name__}: {exc}")

    async def stream(self, messages: list[dict[str, str]], sampling: Sampling) -> AsyncIterator[Delta | StreamEnd]:
        splitter = ThinkSplitter(self.starts_in_reasoning)
        end = StreamEnd()
        kwargs: dict[str, Any] = {"seed": sampling.seed} if sampling.seed is not None else {}
        try:
            stream = await self.client.chat.completions.create(
                model=self.model,
                messages=cast("list[ChatCompletionMessageParam]", messages),  # role and content, as the API has them
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_tokens,
                stream=True,
                stream_options={"include_usage": True},
                **kwargs,
            )
        except self._openai.OpenAIError as exc:
            raise self._error(exc) from None
        saw_reasoning_field = False
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    end.prompt_tokens = chunk.usage.prompt_tokens
                    end.completion_tokens = chunk.usage.completion_tokens
                for choice in chunk.choices[:1]:
                    reasoning, content = _reasoning_of(choice.delta), choice.delta.content
                    saw_reasoning_field = saw_reasoning_field or bool(reasoning)
                    if saw_reasoning_field:  # the server's reasoning parser already split the output
                        deltas = splitter.feed_split(reasoning, content)
                    else:
                        deltas = splitter.feed(content or "")
                    for delta in deltas:
                        yield delta
                    if choice.finish_reason:
                        end.finish_reason = choice.finish_reason
        except self._openai.OpenAIError as exc:
            raise self._error(exc) from None
        except (OSError, RuntimeError) as exc:
            raise self._error(exc) from None
        finally:
            await stream.close()
        for delta in splitter.flush():
            yield delta
        end.think_unclosed = splitter.unclosed
        yield end

    def count_tokens(self, text: str) -> int | None:
        """vLLM's /tokenize endpoint when the server has one; None otherwise."""
        root = api_base(self.server)[: -len("/v1")]
        answer = post_json(f"{root}/tokenize", {"model": self.model, "prompt": text})
        count = answer.get("count") if isinstance(answer, dict) else None
        return int(count) if isinstance(count, int) else None

    async def aclose(self) -> None:
        await self.client.close()
