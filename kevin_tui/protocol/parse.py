"""Finding the kernel in a reply: the last complete Python code block that defines ModelNew.

Fences are read line by line. A bare fence closes an open block; a labelled one (```python) never
does, so it always opens a block, and a block still open before it began at a stray fence. Real
replies have such strays (a lone ``` before ```python); pairing them would start the code with a
fence line. The summary is the prose after the kernel with every other fenced block cut out, so no
code reaches later prompts through it. When the answer has no kernel but the reasoning has one, the
reply is still a format error, and the code is handed back for a front end to offer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FENCE = re.compile(r"[ \t]*`{3,}[ \t]*([\w+.-]*)")
PYTHON_LABELS = {"python", "py", "python3", ""}
# Within one line: `^\s*` ran over every following blank line from each line start (quadratic: a reply of 40,000
# blank lines took 5 s, 1 MB would hold the host for hours; redteam15).
MODEL_NEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.M)
SUMMARY_CHARS = 1200


@dataclass
class ParsedReply:
    code: str | None
    summary: str | None
    error: str | None = None
    code_in_reasoning: str | None = None  # the answer had no kernel; the reasoning has this complete one


@dataclass(frozen=True)
class Block:
    label: str
    body: str
    start: int  # the opening fence
    end: int  # past the closing fence; for a block never closed, where the next one starts or the text ends
    closed: bool


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block in order, closed or not."""
    blocks: list[Block] = []
    opened: tuple[str, int, int] | None = None  # label, fence offset, body offset
    offset = 0
    for line in text.splitlines(keepends=True):
        if match := FENCE.fullmatch(line.rstrip("\r\n")):
            label = match[1].lower()
            if opened and not label:
                blocks.append(Block(opened[0], text[opened[2] : offset], opened[1], offset + len(match[0]), True))
                opened = None
            else:
                if opened:  # a labelled fence inside a block: the block's own fence was a stray
                    blocks.append(Block(opened[0], text[opened[2] : offset], opened[1], offset, False))
                opened = (label, offset, offset + len(line))
        offset += len(line)
    if opened:
        blocks.append(Block(opened[0], text[opened[2] :], opened[1], len(text), False))
    return blocks


def kernels(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b.closed and b.label in PYTHON_LABELS and MODEL_NEW.search(b.body)]


def prose(text: str) -> str:
    """The text without its fenced blocks (fences included); an unclosed block takes the rest."""
    kept, position = [], 0
    for block in fenced_blocks(text):
        kept.append(text[position : block.start])
        position = block.end
    kept.append(text[position:])
    return re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip()


def no_kernel_reason(answer: str, blocks: list[Block]) -> str:
    if not answer.strip():
        return "the reply has no answer after its reasoning"
    if blocks and not blocks[-1].closed:
        return "the code block is not closed (was the reply cut off at the token limit?)"
    if blocks:
        return "no Python code block defines class ModelNew"
    return "the reply has no code block"


def parse_reply(answer: str, reasoning: str = "") -> ParsedReply:
    blocks = fenced_blocks(answer)
    if found := kernels(blocks):
        summary = prose(answer[found[-1].end :])[:SUMMARY_CHARS]
        return ParsedReply(found[-1].body.rstrip() + "\n", summary or None)
    reason = no_kernel_reason(answer, blocks)
    if in_reasoning := kernels(fenced_blocks(reasoning)):
        reason += "; a complete ModelNew block is only in the reasoning, before </think>"
        return ParsedReply(None, None, reason, in_reasoning[-1].body.rstrip() + "\n")
    return ParsedReply(None, None, reason)


def excerpt_summary(reasoning: str, chars: int = 400) -> str:
    """A fallback summary when the model gave none: the end of its reasoning, at most a third of it."""
    flat = " ".join(reasoning.split())
    tail = flat[-min(chars, len(flat) // 3) :] if len(flat) >= 3 else ""
    return ("... " + tail) if tail else "(no summary)"
