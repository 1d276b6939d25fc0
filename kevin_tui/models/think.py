"""Separating reasoning from the answer, by one rule whichever way the output arrives.

The rule is vLLM's `deepseek_r1` reasoning parser's: text before `</think>` is reasoning, text after
it is the answer, and an output with no `</think>` at all is all reasoning, whether the model stopped
or was cut off. A server with that parser sends the two parts in separate fields; the text path
(transformers in-process, a server without a reasoning parser) finds the tags itself, and both end
in the same Reply. A kernel written before `</think>` is then found in the reasoning by parse_reply.

In the text, `</think>` may come alone (QwQ's chat template opens `<think>` in the prompt), a
redundant `<think>` is dropped, and tags can be split across stream chunks, so a possible partial
tag is held back until the next chunk decides it. After `</think>` nothing is a tag any more.
"""

from __future__ import annotations

from typing import Literal

from kevin_tui.models.base import Delta

OPEN, CLOSE = "<think>", "</think>"


class ThinkSplitter:
    def __init__(self, starts_in_reasoning: bool = True) -> None:
        self.in_reasoning = starts_in_reasoning
        self.closed = False
        self.pending = ""
        self.saw_reasoning = False
        self.answer_started = False

    @property
    def unclosed(self) -> bool:
        """Only reasoning arrived: no `</think>`, or nothing after it (a server's reasoning parser
        cannot tell those apart, so neither do we)."""
        return self.saw_reasoning and not self.answer_started

    def _emit(self, kind: Literal["reasoning", "answer"], text: str) -> list[Delta]:
        if kind == "answer" and not self.answer_started:
            text = text.lstrip("\n")  # the newlines after </think> belong to neither part
            self.answer_started = bool(text)
        self.saw_reasoning = self.saw_reasoning or (kind == "reasoning" and bool(text))
        return [Delta(kind, text)] if text else []

    def feed(self, text: str) -> list[Delta]:
        """Raw model output: find the tags."""
        out: list[Delta] = []
        buffer, self.pending = self.pending + text, ""
        while buffer:
            if self.closed:
                return out + self._emit("answer", buffer)
            kind: Literal["reasoning", "answer"] = "reasoning" if self.in_reasoning else "answer"
            tag = CLOSE if self.in_reasoning else OPEN
            index = buffer.find(tag)
            if self.in_reasoning and (other := buffer.find(OPEN)) != -1 and (index == -1 or other < index):
                out += self._emit(kind, buffer[:other])  # a redundant opening tag: drop it
                buffer = buffer[other + len(OPEN) :]
                continue
            if index == -1:
                keep = _partial_tag_suffix(buffer)
                out += self._emit(kind, buffer[: len(buffer) - keep])
                self.pending = buffer[len(buffer) - keep :]
                break
            out += self._emit(kind, buffer[:index])
            buffer = buffer[index + len(tag) :]
            self.closed = self.in_reasoning
            self.in_reasoning = not self.in_reasoning
        return out

    def feed_split(self, reasoning: str | None = None, answer: str | None = None) -> list[Delta]:
        """Output a server's reasoning parser already split into its two fields."""
        return self._emit("reasoning", reasoning or "") + self._emit("answer", answer or "")

    def flush(self) -> list[Delta]:
        out = self._emit("reasoning" if self.in_reasoning else "answer", self.pending)
        self.pending = ""
        return out


def _partial_tag_suffix(text: str) -> int:
    """Length of the longest suffix of `text` that could begin a think tag."""
    for length in range(min(len(CLOSE) - 1, len(text)), 0, -1):
        suffix = text[-length:]
        if CLOSE.startswith(suffix) or OPEN.startswith(suffix):
            return length
    return 0
