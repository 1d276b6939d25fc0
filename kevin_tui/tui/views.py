"""What one row of the timeline shows, built the same way from a live turn or a saved session."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kevin_tui.loop import Turn
from kevin_tui.session import Session, candidate_key

GLYPHS = {  # narrow in every common monospace font (emoji widths vary between terminals)
    "correct": "✓", "compiled": "◇", "incorrect": "✗", "rejected": "⊘", "runtime_error": "!",
    "timeout": "◴", "compile_error": "#", "format_error": "?", "pending": "…",
}  # fmt: skip


@dataclass
class TurnView:
    number: int
    candidate: int = 0
    trajectory: int = 0
    status: str = "pending"
    speedup: float | None = None
    reasoning: str = ""
    answer: str = ""
    code: str | None = None
    summary: str | None = None
    verdict: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int | None = None
    edited: bool = False
    of: int = 1  # candidates sampled in this turn

    @property
    def glyph(self) -> str:
        return GLYPHS.get(self.status, "·")

    def label(self, best: bool) -> str:
        speed = f"{self.speedup:5.2f}x" if self.speedup is not None else "      "
        star = "*" if best else " "
        edited = " ✎" if self.edited else ""
        status = self.status.removesuffix("_error")  # compile, format, runtime: the glyph says error
        which = f".{self.candidate + 1}" if self.of > 1 else ""
        return f"{star}{self.glyph} {self.number:>3}{which} {speed} {status}{edited}"


def view_of(turn: Turn, index: int) -> TurnView:
    candidate = turn.candidates[index]
    return TurnView(
        number=turn.number,
        candidate=index,
        status=candidate.status,
        speedup=candidate.speedup,
        reasoning=candidate.reply.reasoning,
        answer=candidate.reply.answer,
        code=candidate.code,
        summary=candidate.summary,
        verdict=candidate.verdict.to_dict() if candidate.verdict else {},
        prompt_tokens=turn.prompt.tokens,
        edited=candidate.edited_code is not None,
        of=len(turn.candidates),
    )


def views_of_session(session: Session) -> list[TurnView]:
    """One view per attempt that entered the history, with its reply and verdict."""

    replies = session.by_candidate("reply")
    evaluations = session.by_candidate("evaluation")
    prompts = {(e.get("trajectory", 0), e["turn"]): e.get("tokens") for e in session.of_type("prompt")}
    views = []
    for attempt in session.of_type("attempt"):
        k = candidate_key(attempt)
        reply = replies.get(k, {})
        verdict = evaluations.get(k, {}).get("verdict", {})
        views.append(
            TurnView(
                number=attempt["turn"],
                candidate=attempt.get("candidate", 0),
                trajectory=attempt.get("trajectory", 0),
                status=verdict.get("status", attempt["feedback"].get("status", "?")),
                speedup=verdict.get("speedup") if verdict.get("status") == "correct" else None,
                reasoning=reply.get("reasoning", ""),
                answer=reply.get("answer", ""),
                code=attempt.get("code"),
                summary=attempt.get("summary"),
                verdict=verdict,
                prompt_tokens=prompts.get((k[0], k[1])),
                edited=attempt.get("edited", False),
            )
        )
    return views


def best_index(views: list[TurnView]) -> int | None:
    correct = [i for i, v in enumerate(views) if v.status == "correct"]
    return max(correct, key=lambda i: views[i].speedup or 0.0) if correct else None
