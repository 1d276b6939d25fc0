"""What the front ends show of one candidate, built the same way from a live turn or a saved session,
and the two display rules that go with it: which candidate is the best, and which earlier kernel a
diff compares with.
"""

from __future__ import annotations

from dataclasses import dataclass

from kevin_tui.evaluator.verdict import Verdict
from kevin_tui.loop import Candidate, Turn
from kevin_tui.ranking import Score, best_correct, ranked
from kevin_tui.session import CandidateRecord, CandidateRef, Session


@dataclass(frozen=True)
class CandidateView:
    ref: CandidateRef
    score: Score
    reasoning: str = ""
    answer: str = ""
    code: str | None = None
    summary: str | None = None
    verdict: Verdict | None = None
    prompt_tokens: int | None = None
    edited: bool = False
    chosen: bool = False  # entered the history
    of: int = 1  # candidates in its turn
    accepted: bool = False  # committed beside the problem (recorded in the session)

    @property
    def status(self) -> str:
        return self.score.status

    @property
    def number(self) -> int:
        return self.ref.turn

    @property
    def speedup(self) -> float | None:
        return self.score.speedup if self.score.correct else None


def view_of(turn: Turn, candidate: Candidate) -> CandidateView:
    return CandidateView(
        ref=candidate.ref,
        score=candidate.score,
        reasoning=candidate.reply.reasoning,
        answer=candidate.reply.answer,
        code=candidate.code,
        summary=candidate.summary,
        verdict=candidate.verdict,
        prompt_tokens=turn.prompt.tokens if turn.prompt else None,
        edited=candidate.edited_code is not None,
        chosen=turn.chosen == candidate.index,
        of=len(turn.candidates),
    )


def views_of_turns(turns: list[Turn]) -> list[CandidateView]:
    """Turn by turn, each turn's candidates best first."""
    return [view_of(turn, candidate) for turn in turns for candidate in turn.ranked()]


def view_of_record(record: CandidateRecord, of: int) -> CandidateView:
    return CandidateView(
        ref=record.ref,
        score=record.score,
        reasoning=record.reply.reasoning if record.reply else "",
        answer=record.reply.answer if record.reply else "",
        code=record.code,
        summary=record.summary,
        verdict=record.verdict,
        prompt_tokens=record.prompt.tokens if record.prompt else None,
        edited=record.edit is not None,
        chosen=record.attempt is not None,
        of=of,
        accepted=any(a.commit and not a.error for a in record.accepts),
    )


def views_of_session(session: Session, trajectory: int = 0) -> list[CandidateView]:
    """One trajectory of a saved session, as the live app showed it."""
    records = [r for r in session.candidates() if r.ref.trajectory == trajectory]
    per_turn: dict[int, list[CandidateRecord]] = {}
    for record in records:
        per_turn.setdefault(record.ref.turn, []).append(record)
    views = []
    for turn in sorted(per_turn):
        group = per_turn[turn]
        views += [view_of_record(r, len(group)) for r in ranked(group, lambda r: r.score)]
    return views


def best_view(views: list[CandidateView]) -> CandidateView | None:
    return best_correct(views, lambda v: v.score)


def diff_base(views: list[CandidateView], view: CandidateView) -> CandidateView | None:
    """What a kernel is compared with: the best correct kernel of an earlier turn, else the kernel
    of the turn before (the chosen one if there was a choice)."""
    earlier = [v for v in views if v.number < view.number and v.code]
    if best := best_view(earlier):
        return best
    if not earlier:
        return None
    last = max(v.number for v in earlier)
    previous = [v for v in earlier if v.number == last]
    return next((v for v in previous if v.chosen), previous[0])
