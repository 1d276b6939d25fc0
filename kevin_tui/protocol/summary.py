"""Each attempt enters later prompts with the model's own summary, never its chain of thought.

When a reply has no summary after its code block, one short follow-up request (bounded tokens)
asks for it; failing that, a trimmed excerpt of the end of the reasoning stands in.
"""

from __future__ import annotations

from dataclasses import replace

from kevin_tui.models.base import Backend, BackendError, Sampling, collect
from kevin_tui.protocol.feedback import Feedback
from kevin_tui.protocol.parse import ParsedReply, excerpt_summary
from kevin_tui.protocol.prompt import Attempt, Prompt
from kevin_tui.protocol.templates import Templates

SUMMARY_MAX_TOKENS = 384
SUMMARY_MAX_CHARS = 800


async def obtain_summary(
    backend: Backend, prompt: Prompt, answer: str, reasoning: str, templates: Templates, sampling: Sampling
) -> tuple[str, str]:
    """(summary, where it came from: 'follow-up' or 'excerpt') for a reply that gave none."""
    messages = [
        *prompt.messages,
        {"role": "assistant", "content": answer},
        {"role": "user", "content": templates.render("summary_request").strip()},
    ]
    try:
        reply = await collect(backend.stream(messages, replace(sampling, max_tokens=SUMMARY_MAX_TOKENS)))
    except BackendError:
        reply = None
    text = (reply.answer if reply and reply.end.finish_reason == "stop" else "").strip()
    if text and "```" not in text:
        return text[:SUMMARY_MAX_CHARS], "follow-up"
    return excerpt_summary(reasoning), "excerpt"


def make_attempt(
    number: int, parsed: ParsedReply, feedback: Feedback, summary: str | None = None, edited_code: str | None = None
) -> Attempt:
    """The attempt as later prompts show it; a hand-edited kernel replaces the model's code (the
    templates mark it, so the summary stays the model's own words)."""
    code = edited_code if edited_code is not None else parsed.code
    text = summary or parsed.summary or "(no summary)"
    return Attempt(number, code, text, feedback, edited_by_user=edited_code is not None)
