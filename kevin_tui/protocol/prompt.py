"""Building the prompt for turn k, the way Kevin was trained, inside a token budget.

Turn 1 is the base prompt with one worked example. Turn k > 1 is the base prompt without the
example, then every earlier attempt in order (its code, the model's own summary, the evaluation
feedback), the user's note if any, and the instruction to start over. An earlier turn's chain of
thought is never included, only its summary: that is what keeps the context small. When the
prompt is over budget the oldest attempts go first, but the latest and the best correct one stay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from kevin_tui.protocol.feedback import Feedback
from kevin_tui.protocol.templates import Templates
from kevin_tui.ranking import Score, best_correct

DEFAULT_BUDGET = 8192
NO_CODE = "# (no usable code could be extracted from this answer)"
TIGHT_DETAIL_LINES = 3

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """A conservative count when no tokenizer is at hand: code and prose run ~3.5-4 chars a token."""
    return len(text) // 3 + 1


class CountsTokens(Protocol):
    name: str

    def count_tokens(self, text: str) -> int | None: ...


def token_counter(backend: CountsTokens) -> tuple[TokenCounter, str]:
    """The model's own tokenizer (local, or the server's tokenize endpoint), else the estimate."""
    if backend.count_tokens("probe") is not None:
        return (lambda text: backend.count_tokens(text) or estimate_tokens(text)), f"{backend.name} tokenizer"
    return estimate_tokens, "estimate"


@dataclass
class Attempt:
    number: int
    code: str | None
    summary: str
    feedback: Feedback
    edited_by_user: bool = False

    @property
    def correct(self) -> bool:
        return self.feedback.status == "correct"

    @property
    def correct_speedup(self) -> float | None:
        return self.feedback.speedup if self.correct else None


@dataclass
class Prompt:
    text: str
    tokens: int
    counted_with: str
    included: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    over_budget: bool = False

    @property
    def messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.text}]


def attempt_score(attempt: Attempt) -> Score:
    feedback = attempt.feedback
    low, high = getattr(feedback, "speedup_low", None), getattr(feedback, "speedup_high", None)
    return Score(feedback.status, feedback.speedup, [low, high] if low is not None and high is not None else None)


def best_attempt(attempts: list[Attempt]) -> Attempt | None:
    """The best correct attempt by the one ranking rule (kevin_tui.ranking)."""
    return best_correct(attempts, attempt_score)


class PromptBuilder:
    """Renders prompts from a template set. Each template is a paragraph (or several): its surrounding
    newlines are trimmed, empty ones are left out, and one blank line separates the rest."""

    def __init__(
        self,
        templates: Templates,
        problem_source: str,
        budget: int = DEFAULT_BUDGET,
        counter: TokenCounter | None = None,
        counted_with: str = "estimate",
        speed_of_light: str | None = None,
    ) -> None:
        self.templates = templates
        self.problem_source = problem_source.rstrip("\n")
        self.budget = budget
        self.counter = counter or estimate_tokens
        self.counted_with = counted_with if counter else "estimate"
        self.speed_of_light = speed_of_light  # one line on the least time the problem can take; turn 1 only

    def _feedback_text(self, feedback: Feedback, detail_lines: int | None) -> str:
        if detail_lines is not None:
            feedback = replace(feedback, detail="\n".join(feedback.detail.splitlines()[:detail_lines]))
        return self.templates.feedback(
            feedback.status,
            message=feedback.message,
            detail=feedback.detail,
            error=feedback.error,
            speedup=feedback.speedup_text,
        )

    def render(self, attempts: list[Attempt], note: str | None = None, detail_lines: int | None = None) -> str:
        t = self.templates
        first_turn = not attempts
        parts = [t.render("base", problem=self.problem_source, example=t.texts["example"] if first_turn else "")]
        if first_turn and self.speed_of_light:
            parts.append(t.render("speed_of_light", line=self.speed_of_light.strip()))
        if attempts:
            parts.append(t.render("history_header"))
            for attempt in attempts:
                parts.append(
                    t.render(
                        "attempt",
                        number=attempt.number,
                        edited=t.texts["edited"] if attempt.edited_by_user else "",
                        code=(attempt.code or NO_CODE).rstrip("\n"),
                        summary=attempt.summary.strip() or "(none)",
                        feedback=self._feedback_text(attempt.feedback, detail_lines),
                    )
                )
        if note:
            parts.append(t.render("note", note=note.strip()))
        if attempts:
            parts.append(t.render("refine"))
        parts.append(t.render("answer_format"))
        return "\n\n".join(p for part in parts if (p := part.strip("\n"))) + "\n"

    def build(self, attempts: list[Attempt], note: str | None = None) -> Prompt:
        """The prompt for the next turn, dropping the oldest attempts while it is over budget."""
        kept = list(attempts)
        best = best_attempt(attempts)
        protected = {attempts[-1].number} if attempts else set()
        if best is not None:
            protected.add(best.number)
        dropped: list[int] = []
        detail_lines: int | None = None
        while True:
            text = self.render(kept, note, detail_lines)
            tokens = self.counter(text)
            if tokens <= self.budget:
                break
            droppable = [a for a in kept if a.number not in protected]
            if droppable:
                kept.remove(droppable[0])
                dropped.append(droppable[0].number)
            elif detail_lines is None:
                detail_lines = TIGHT_DETAIL_LINES
            else:
                return Prompt(text, tokens, self.counted_with, [a.number for a in kept], dropped, over_budget=True)
        return Prompt(text, tokens, self.counted_with, [a.number for a in kept], dropped)
