"""In-process generation with transformers: a local model directory or a hub id; works on the CPU.

generate() blocks, so it runs in a thread and hands text to the event loop through a queue
(TextIteratorStreamer). Closing the stream sets a flag that a StoppingCriteria checks after every
token, so a cancelled generation stops within one token.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

from kevin_tui.devices import resolve_device
from kevin_tui.models.base import BackendError, Delta, Sampling, StreamEnd, TokenCounting
from kevin_tui.models.think import ThinkSplitter


class TransformersBackend:
    name = "transformers"
    token_counting: TokenCounting = "model"

    def __init__(self, model: str, device: str = "auto", starts_in_reasoning: bool = True) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise BackendError(f"transformers is not installed ({exc}): pip install transformers") from None
        self.model = model
        self.starts_in_reasoning = starts_in_reasoning
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model)
            dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
            self.lm = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
        except (OSError, ValueError) as exc:
            raise BackendError(f"cannot load model {model!r}: {exc}") from None
        self.device = device = resolve_device(device, torch.cuda.is_available)
        self.lm.to(device).eval()  # type: ignore[arg-type]  # transformers types .to through functools.wraps

    def _prompt_ids(self, messages: list[dict[str, str]]) -> Any:
        from transformers import BatchEncoding

        if getattr(self.tokenizer, "chat_template", None):
            encoded = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        else:
            encoded = self.tokenizer("\n\n".join(m["content"] for m in messages), return_tensors="pt")
        if not isinstance(encoded, BatchEncoding):
            raise BackendError(f"the tokenizer of {self.model} gave {type(encoded).__name__}, not token ids")
        return encoded["input_ids"].to(self.device)

    async def stream(self, messages: list[dict[str, str]], sampling: Sampling) -> AsyncIterator[Delta | StreamEnd]:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        cancelled = threading.Event()

        class StopWhenCancelled(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs) -> bool:
                return cancelled.is_set()

        ids = self._prompt_ids(messages)
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True, timeout=None)
        result: dict[str, Any] = {}
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)

        def generate() -> None:
            try:
                with torch.no_grad():
                    result["ids"] = self.lm.generate(
                        ids,
                        attention_mask=torch.ones_like(ids),
                        do_sample=sampling.temperature > 0,
                        temperature=sampling.temperature if sampling.temperature > 0 else None,
                        top_p=sampling.top_p,
                        max_new_tokens=sampling.max_tokens,
                        streamer=streamer,
                        stopping_criteria=StoppingCriteriaList([StopWhenCancelled()]),
                        pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                    )
            except Exception as exc:
                result["error"] = exc
                streamer.end()

        thread = threading.Thread(target=generate, name="kevin-generate", daemon=True)
        thread.start()
        splitter = ThinkSplitter(self.starts_in_reasoning)
        loop = asyncio.get_running_loop()
        try:
            while True:
                text = await loop.run_in_executor(None, next, streamer, None)
                if text is None:
                    break
                for delta in splitter.feed(text):
                    yield delta
        finally:
            cancelled.set()
            await loop.run_in_executor(None, thread.join)
        if "error" in result:
            raise BackendError(f"generation failed: {result['error']}")
        for delta in splitter.flush():
            yield delta
        new_tokens = int(result["ids"].shape[-1] - ids.shape[-1])
        finish = "length" if new_tokens >= sampling.max_tokens else "stop"
        yield StreamEnd(finish, int(ids.shape[-1]), new_tokens, think_unclosed=splitter.unclosed)

    def count_tokens(self, text: str) -> int | None:
        return len(self.tokenizer(text).input_ids)

    async def aclose(self) -> None:
        return None
