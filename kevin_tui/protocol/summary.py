"""Each attempt enters later prompts with the model's own summary, never its chain of thought.

When a reply has no summary after its code block, one short follow-up request (bounded tokens)
asks for it; failing that, a trimmed excerpt of the end of the reasoning stands in. This module
says what to ask and what to keep; the loop (kevin_tui.loop) is the one that calls the model.
"""

from __future__ import annotations

from dataclasses import replace

from kevin_tui.models.base import Reply, Sampling
from kevin_tui.protocol.feedback import Feedback
from kevin_tui.protocol.parse import ParsedReply, excerpt_summary
from kevin_tui.protocol.prompt import Attempt, Prompt
from kevin_tui.protocol.templates import Templates

SUMMARY_MAX_TOKENS = 384
SUMMARY_MAX_CHARS = 800


def summary_request(
    prompt: Prompt, answer: str, templates: Templates, sampling: Sampling
) -> tuple[list[dict[str, str]], Sampling]:
    """The follow-up that asks for the summary a reply did not give: the conversation so far plus the
    request, with a small token bound."""
    messages = [
        *prompt.messages,
        {"role": "assistant", "content": answer},
        {"role": "user", "content": templates.render("summary_request").strip()},
    ]
    return messages, replace(sampling, max_tokens=SUMMARY_MAX_TOKENS)


def summary_from(follow_up: Reply | None, reasoning: str) -> tuple[str, str]:
    """(summary, where it came from: 'follow-up' or 'excerpt'): the follow-up's answer if it finished
    and holds no code, else an excerpt of the reasoning (None: the follow-up failed)."""
    text = (follow_up.answer if follow_up and follow_up.end.finish_reason == "stop" else "").strip()
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
