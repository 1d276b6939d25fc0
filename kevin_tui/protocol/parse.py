"""Finding the kernel in a reply: the last complete Python code block that defines ModelNew."""

from __future__ import annotations

import re
from dataclasses import dataclass

FENCE_OPEN = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*$", re.M)
PYTHON_LABELS = {"python", "py", "python3", ""}
MODEL_NEW = re.compile(r"^\s*class\s+ModelNew\b", re.M)
SUMMARY_CHARS = 1200


@dataclass
class ParsedReply:
    code: str | None
    summary: str | None
    error: str | None = None


def code_blocks(text: str) -> tuple[list[tuple[str, str, int]], bool]:
    """(label, body, end offset) of each closed fenced block, and whether a fence was left open."""
    blocks, position, unclosed = [], 0, False
    while match := FENCE_OPEN.search(text, position):
        closing = re.compile(r"^[ \t]*```[ \t]*$", re.M).search(text, match.end())
        if closing is None:
            unclosed = True
            break
        blocks.append((match[1].lower(), text[match.end() + 1 : closing.start()], closing.end()))
        position = closing.end()
    return blocks, unclosed


def parse_reply(answer: str) -> ParsedReply:
    blocks, unclosed = code_blocks(answer)
    usable = [(body, end) for label, body, end in blocks if label in PYTHON_LABELS]
    candidates = [(body, end) for body, end in usable if MODEL_NEW.search(body)]
    if not candidates:
        if unclosed:
            reason = "the code block is not closed (was the reply cut off at the token limit?)"
        elif blocks:
            reason = "no Python code block defines class ModelNew"
        else:
            reason = "the reply has no code block"
        return ParsedReply(None, None, reason)
    code, end = candidates[-1]
    after = answer[end:].strip()
    summary = after[:SUMMARY_CHARS] if after else None
    return ParsedReply(code.rstrip() + "\n", summary)


def excerpt_summary(reasoning: str, chars: int = 400) -> str:
    """A fallback summary when the model gave none: the end of its reasoning, at most a third of it."""
    flat = " ".join(reasoning.split())
    tail = flat[-min(chars, len(flat) // 3) :] if len(flat) >= 3 else ""
    return ("... " + tail) if tail else "(no summary)"
