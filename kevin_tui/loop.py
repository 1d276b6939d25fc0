"""The refinement loop, independent of any UI: prompt -> stream -> parse -> evaluate -> feedback.

An `Agent` runs turns for one trajectory and records every step in the session as it happens.
The UI (TUI or headless) listens to events and calls the intents: next turn (with a note), retry,
edit, choose a candidate, stop. It holds no logic of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from kevin_tui.evaluator import Evaluator, Status, Verdict
from kevin_tui.models.base import Backend, BackendError, Reply, Sampling, StreamEnd
from kevin_tui.protocol.feedback import Feedback, feedback_from_verdict, format_error_feedback
from kevin_tui.protocol.parse import ParsedReply, parse_reply
from kevin_tui.protocol.prompt import Attempt, Prompt, PromptBuilder, best_attempt
from kevin_tui.protocol.summary import make_attempt, obtain_summary
from kevin_tui.protocol.templates import Templates
from kevin_tui.session import Session, SessionWriter

Listener = Callable[[str, dict[str, Any]], None]
RANK = {
    s: i
    for i, s in enumerate(
        ["correct", "compiled", "incorrect", "rejected", "runtime_error", "timeout", "compile_error", "format_error"]
    )
}


@dataclass
class Candidate:
    index: int
    reply: Reply
    parsed: ParsedReply
    summary: str | None = None
    summary_source: str = "reply"
    feedback: Feedback | None = None
    verdict: Verdict | None = None
    edited_code: str | None = None

    @property
    def code(self) -> str | None:
        return self.edited_code if self.edited_code is not None else self.parsed.code

    @property
    def status(self) -> str:
        return self.feedback.status if self.feedback else "pending"

    @property
    def speedup(self) -> float | None:
        return self.feedback.speedup if self.feedback and self.feedback.status == "correct" else None

    def rank_key(self) -> tuple[int, float]:
        return (RANK.get(self.status, len(RANK)), -(self.speedup or 0.0))


@dataclass
class Turn:
    number: int
    prompt: Prompt
    note: str | None = None
    candidates: list[Candidate] = field(default_factory=list)
    chosen: int | None = None
    failed: str | None = None
    stopped: bool = False

    def ranked(self) -> list[Candidate]:
        return sorted(self.candidates, key=Candidate.rank_key)


@dataclass
class LoopConfig:
    candidates: int = 1
    budget: int = 8192
    sampling: Sampling = field(default_factory=Sampling)
    follow_up_summaries: bool = True


class Agent:
    def __init__(
        self,
        builder: PromptBuilder,
        backend: Backend,
        evaluator: Evaluator,
        templates: Templates,
        session: SessionWriter,
        config: LoopConfig | None = None,
        listener: Listener | None = None,
        trajectory: int = 0,
    ) -> None:
        self.builder = builder
        self.backend = backend
        self.evaluator = evaluator
        self.templates = templates
        self.session = session
        self.config = config or LoopConfig()
        self.listener = listener or (lambda kind, data: None)
        self.trajectory = trajectory
        self.attempts: list[Attempt] = []
        self.turns: list[Turn] = []
        self._streams: list[asyncio.Task] = []

    # -- state ---------------------------------------------------------------

    @property
    def next_number(self) -> int:
        return max([t.number for t in self.turns] + [a.number for a in self.attempts], default=0) + 1

    @property
    def best(self) -> Attempt | None:
        return best_attempt(self.attempts)

    def record(self, kind: str, **fields: Any) -> None:
        event = self.session.write(kind, trajectory=self.trajectory, **fields)
        self.listener(kind, event)

    def restore(self, session: Session) -> None:
        """Continue a saved session: its attempts become the history again."""
        for event in session.of_type("attempt"):
            if event.get("trajectory", 0) != self.trajectory:
                continue
            feedback = Feedback(**event["feedback"])
            self.attempts.append(
                Attempt(event["turn"], event["code"], event["summary"], feedback, event.get("edited", False))
            )

    # -- intents ---------------------------------------------------------------

    async def run_turn(self, note: str | None = None, number: int | None = None) -> Turn:
        """Prompt, sample N candidates, evaluate each; the caller then chooses one (or retries)."""
        turn = await self.generate_turn(note, number)
        await self.evaluate_turn(turn)
        return turn

    async def generate_turn(self, note: str | None = None, number: int | None = None) -> Turn:
        """The first half of a turn: prompt, stream, parse, summarise. No GPU work for kernels."""
        number = number or self.next_number
        if note:
            self.record("note", turn=number, text=note)
        prompt = self.builder.build(self.attempts, note)
        turn = Turn(number, prompt, note)
        self.turns.append(turn)
        self.record(
            "prompt",
            turn=number,
            tokens=prompt.tokens,
            counted_with=prompt.counted_with,
            included=prompt.included,
            dropped=prompt.dropped,
            over_budget=prompt.over_budget,
            text=prompt.text,
        )
        try:
            replies = await self._generate(turn)
        except BackendError as exc:
            turn.failed = str(exc)
            self.record("error", turn=number, message=str(exc))
            raise
        for index, reply in enumerate(replies):
            candidate = Candidate(index, reply, parse_reply(reply.answer))
            turn.candidates.append(candidate)
            await self._summarise(turn, candidate)
        return turn

    async def evaluate_turn(self, turn: Turn) -> None:
        """The second half: build the candidates in parallel, then check and time them one at a time."""
        sources = [c.code for c in turn.candidates if c.code]
        if len(sources) > 1:  # build in parallel; run and time one at a time
            await asyncio.to_thread(self.evaluator.prebuild, sources)
        for candidate in turn.candidates:
            await self._evaluate(turn, candidate)

    async def edit(self, code: str, summary: str | None = None) -> Turn:
        """Evaluate a kernel the user edited by hand; it becomes the next attempt, marked as edited."""
        base = self.turns[-1].ranked()[0] if self.turns and self.turns[-1].candidates else None
        number = self.next_number
        turn = Turn(number, self.builder.build(self.attempts))
        parsed = ParsedReply(code, summary or (base.summary if base else None))
        candidate = Candidate(0, Reply(complete=True), parsed, parsed.summary, "user", edited_code=code)
        turn.candidates.append(candidate)
        self.turns.append(turn)
        self.record("edit", turn=number, code=code)
        await self._evaluate(turn, candidate)
        self.choose(turn, 0)
        return turn

    def choose(self, turn: Turn, index: int) -> Attempt:
        """The chosen candidate enters the history that later prompts show."""
        candidate = turn.candidates[index]
        turn.chosen = index
        attempt = make_attempt(
            turn.number, candidate.parsed, candidate.feedback, candidate.summary, candidate.edited_code
        )
        self.attempts.append(attempt)
        self.record(
            "attempt",
            turn=turn.number,
            candidate=index,
            code=attempt.code,
            summary=attempt.summary,
            feedback=asdict(attempt.feedback),
            edited=attempt.edited_by_user,
        )
        return attempt

    def stop(self) -> None:
        """Stop generation now; what already arrived is kept."""
        for task in self._streams:
            task.cancel()

    # -- steps -----------------------------------------------------------------

    async def _generate(self, turn: Turn) -> list[Reply]:
        replies = [Reply() for _ in range(self.config.candidates)]

        async def consume(index: int) -> None:
            async for item in self.backend.stream(turn.prompt.messages, self.config.sampling):
                if isinstance(item, StreamEnd):
                    replies[index].finish(item)
                else:
                    replies[index].add(item)
                    self.listener(
                        "delta", {"turn": turn.number, "candidate": index, "kind": item.kind, "text": item.text}
                    )

        self._streams = [asyncio.create_task(consume(i)) for i in range(len(replies))]
        try:
            results = await asyncio.gather(*self._streams, return_exceptions=True)
        finally:
            for task in self._streams:
                task.cancel()
            self._streams = []
            for index, reply in enumerate(replies):
                self.record(
                    "reply",
                    turn=turn.number,
                    candidate=index,
                    reasoning=reply.reasoning,
                    answer=reply.answer,
                    complete=reply.complete,
                    finish_reason=reply.end.finish_reason,
                    prompt_tokens=reply.end.prompt_tokens,
                    completion_tokens=reply.end.completion_tokens,
                )
        errors = [r for r in results if isinstance(r, BackendError)]
        if errors and not any(r.complete for r in replies):
            raise errors[0]
        if any(isinstance(r, asyncio.CancelledError) for r in results):
            turn.stopped = True
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, BackendError | asyncio.CancelledError):
                raise result
        return replies

    async def _summarise(self, turn: Turn, candidate: Candidate) -> None:
        parsed, reply = candidate.parsed, candidate.reply
        candidate.summary = parsed.summary
        if parsed.code is not None and not parsed.summary and self.config.follow_up_summaries and reply.complete:
            candidate.summary, candidate.summary_source = await obtain_summary(
                self.backend, turn.prompt, reply.answer, reply.reasoning, self.templates, self.config.sampling
            )
        self.record(
            "kernel",
            turn=turn.number,
            candidate=candidate.index,
            code=parsed.code,
            error=parsed.error,
            summary=candidate.summary,
            summary_source=candidate.summary_source,
        )

    async def _evaluate(self, turn: Turn, candidate: Candidate) -> None:
        if candidate.code is None:
            reason = candidate.parsed.error or "no code"
            if not candidate.reply.complete and not candidate.edited_code:
                reason = f"generation was stopped before the answer was complete ({reason})"
            candidate.feedback = format_error_feedback(reason)
            verdict = Verdict(Status.FORMAT_ERROR, reason)
        else:
            verdict = await asyncio.to_thread(self.evaluator.evaluate, candidate.code)
            if verdict.details.get("reference_lost"):  # our failure, not the kernel's: once more, fresh
                self.record("error", turn=turn.number, message=verdict.message)
                verdict = await asyncio.to_thread(self.evaluator.evaluate, candidate.code)
            candidate.feedback = feedback_from_verdict(verdict)
        candidate.verdict = verdict
        self.record("evaluation", turn=turn.number, candidate=candidate.index, verdict=verdict.to_dict())
