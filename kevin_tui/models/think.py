"""Separating reasoning from the answer when both arrive in the text.

Three forms reach us: a separate reasoning field (a server with a reasoning parser: handled by the
backend), `<think>...</think>` inside the text, or only the closing `</think>` because QwQ's chat
template already opened `<think>` in the prompt. Tags can be split across stream chunks, so a
possible partial tag is held back until the next chunk decides it.
"""

from __future__ import annotations

from kevin_tui.models.base import Delta

OPEN, CLOSE = "<think>", "</think>"


class ThinkSplitter:
    def __init__(self, starts_in_reasoning: bool = True) -> None:
        self.in_reasoning = starts_in_reasoning
        self.closed = False
        self.pending = ""
        self.answer_started = False

    def _emit(self, text: str) -> list[Delta]:
        if not self.in_reasoning and not self.answer_started:
            text = text.lstrip("\n")  # the newline after </think> belongs to neither part
            self.answer_started = bool(text)
        return [Delta("reasoning" if self.in_reasoning else "answer", text)] if text else []

    def feed(self, text: str) -> list[Delta]:
        out: list[Delta] = []
        buffer = self.pending + text
        self.pending = ""
        while buffer:
            tag = CLOSE if self.in_reasoning else OPEN
            index = buffer.find(tag)
            if self.in_reasoning and (other := buffer.find(OPEN)) != -1 and (index == -1 or other < index):
                out += self._emit(buffer[:other])  # a redundant opening tag: drop it
                buffer = buffer[other + len(OPEN) :]
                continue
            if index == -1:
                keep = _partial_tag_suffix(buffer)
                out += self._emit(buffer[: len(buffer) - keep])
                self.pending = buffer[len(buffer) - keep :]
                break
            out += self._emit(buffer[:index])
            buffer = buffer[index + len(tag) :]
            if self.in_reasoning:
                self.closed = True
            self.in_reasoning = not self.in_reasoning
        return out

    def flush(self) -> list[Delta]:
        out, self.pending = self._emit(self.pending), ""
        return out


def _partial_tag_suffix(text: str) -> int:
    """Length of the longest suffix of `text` that could begin a think tag."""
    for length in range(min(len(CLOSE) - 1, len(text)), 0, -1):
        suffix = text[-length:]
        if CLOSE.startswith(suffix) or OPEN.startswith(suffix):
            return length
    return 0
