"""One trajectory's refinement loop, independent of any UI: prompt -> stream -> parse -> evaluate ->
feedback, every step recorded in the session as it happens.

An `Agent` does each step when told to; what to do next (which candidate continues, when to
retry, when a kernel may be evaluated) is the driver's decision (kevin_tui.driver).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kevin_tui.evaluator import Status, Verdict
from kevin_tui.evaluator.evidence import LaterEvidence, cancel, merge, pending
from kevin_tui.judge import Judge
from kevin_tui.models.base import Backend, BackendError, Reply, Sampling, StreamEnd, collect
from kevin_tui.models.tokens import PromptTokens
from kevin_tui.protocol.feedback import Feedback, feedback_from_verdict, format_error_feedback
from kevin_tui.protocol.parse import ParsedReply, parse_reply
from kevin_tui.protocol.prompt import Attempt, Prompt, PromptBuilder
from kevin_tui.protocol.summary import make_attempt, summary_from, summary_request
from kevin_tui.protocol.templates import Templates
from kevin_tui.ranking import Score, ranked
from kevin_tui.session import CandidateRecord, CandidateRef, SessionWriter
from kevin_tui.session.events import (
    AttemptEvent,
    EditEvent,
    ErrorEvent,
    EvaluationEvent,
    Event,
    EvidenceEvent,
    KernelEvent,
    NoteEvent,
    PromptEvent,
    ReplyEvent,
    RetryEvent,
)


@dataclass(frozen=True)
class Evaluating:
    """Told to the listener just before a candidate is evaluated."""

    ref: CandidateRef


Listener = Callable[[Event | Evaluating], None]


def builds_extension(source: str) -> bool:
    """Whether a candidate compiles an extension (load_inline / load from torch.utils.cpp_extension)."""
    return "cpp_extension" in source or "load_inline" in source


@dataclass
class Candidate:
    ref: CandidateRef
    reply: Reply
    parsed: ParsedReply
    summary: str | None = None
    summary_source: str = "reply"
    feedback: Feedback | None = None
    verdict: Verdict | None = None
    edited_code: str | None = None
    evidence: LaterEvidence | None = None  # what still follows the verdict (gather_evidence runs it)

    @property
    def index(self) -> int:
        return self.ref.candidate

    @property
    def code(self) -> str | None:
        return self.edited_code if self.edited_code is not None else self.parsed.code

    @property
    def status(self) -> str:
        return self.feedback.status if self.feedback else "pending"

    @property
    def speedup(self) -> float | None:
        return self.verdict.speedup if self.verdict and self.status == "correct" else None

    @property
    def score(self) -> Score:
        verdict = self.verdict
        return Score(self.status, verdict.speedup if verdict else None, verdict.speedup_interval if verdict else None)


@dataclass
class Turn:
    trajectory: int
    number: int
    prompt: Prompt | None  # None only for a hand edit restored from a schema-1 session
    note: str | None = None
    candidates: list[Candidate] = field(default_factory=list)
    chosen: int | None = None  # the candidate that entered the history
    failed: str | None = None
    stopped: bool = False

    def ranked(self) -> list[Candidate]:
        return ranked(self.candidates, lambda c: c.score)

    @property
    def edited(self) -> bool:
        return any(c.edited_code is not None for c in self.candidates)


@dataclass
class LoopConfig:
    candidates: int = 1
    sampling: Sampling = field(default_factory=Sampling)
    follow_up_summaries: bool = True


class Agent:
    def __init__(
        self,
        builder: PromptBuilder,
        backend: Backend,
        evaluator: Judge,
        templates: Templates,
        session: SessionWriter,
        config: LoopConfig | None = None,
        listener: Listener | None = None,
        trajectory: int = 0,
        tokens: PromptTokens | None = None,
    ) -> None:
        self.builder = builder
        self.backend = backend
        self.evaluator = evaluator
        self.templates = templates
        self.session = session
        self.config = config or LoopConfig()
        self.listener = listener or (lambda event: None)
        self.trajectory = trajectory
        self.tokens = tokens
        self.attempts: list[Attempt] = []
        self.turns: list[Turn] = []
        self.live: list[Reply] = []  # the replies streaming now
        self._streams: list[asyncio.Task] = []

    # -- state ---------------------------------------------------------------

    @property
    def next_number(self) -> int:
        return max([t.number for t in self.turns] + [a.number for a in self.attempts], default=0) + 1

    def record(self, event: Event) -> Event:
        event = self.session.write(event)
        self.listener(event)
        return event

    def restore(self, records: list[CandidateRecord], prompts: dict[int, PromptEvent]) -> None:
        """Continue a saved session: its turns and the history exactly as they were."""
        turns: dict[int, Turn] = {}
        for record in records:
            number = record.ref.turn
            if number not in turns:
                event = prompts.get(number)
                prompt = None if event is None else Prompt(
                    event.text, event.tokens, event.counted_with, event.included, event.dropped, event.over_budget
                )  # fmt: skip
                turns[number] = Turn(self.trajectory, number, prompt)
            turn = turns[number]
            candidate = _restored_candidate(record)
            turn.candidates.append(candidate)
            if record.attempt is not None:
                turn.chosen = candidate.index
                attempt = record.attempt
                self.attempts.append(Attempt(number, attempt.code, attempt.summary, attempt.feedback, attempt.edited))
        self.turns = sorted(turns.values(), key=lambda t: t.number)
        self.attempts.sort(key=lambda a: a.number)

    # -- steps -----------------------------------------------------------------

    async def build_prompt(self, note: str | None = None) -> Prompt:
        """Off the event loop: counting tokens may ask the server."""
        prompt = await asyncio.to_thread(self.builder.build, self.attempts, note)
        if self.tokens is not None:
            prompt.counted_with = self.tokens.counted_with
        return prompt

    async def generate(self, note: str | None = None) -> Turn:
        """A new turn: prompt, stream the candidates, parse and summarise them. No kernel is run."""
        number = self.next_number
        if note:
            self.record(NoteEvent(trajectory=self.trajectory, turn=number, text=note))
        prompt = await self.build_prompt(note)
        turn = Turn(self.trajectory, number, prompt, note)
        self.turns.append(turn)
        self.record(
            PromptEvent(
                trajectory=self.trajectory, turn=number, tokens=prompt.tokens, counted_with=prompt.counted_with,
                included=prompt.included, dropped=prompt.dropped, over_budget=prompt.over_budget, text=prompt.text,
            )
        )  # fmt: skip
        await self._sample(turn)
        return turn

    async def resample(self, turn: Turn) -> list[Candidate]:
        """More candidates for a turn from its own prompt (a retry); they join the turn's candidates."""
        first = len(turn.candidates)
        self.record(RetryEvent(trajectory=self.trajectory, turn=turn.number, first_candidate=first))
        turn.stopped, turn.failed = False, None
        await self._sample(turn)
        return turn.candidates[first:]

    async def build(self, candidates: list[Candidate], alone: bool = False) -> None:
        """Build several candidates' extensions in parallel (one alone too, with `alone`), so that
        checking and timing them finds them built. Only sources that build an extension are sent:
        for the others there is nothing to build. Failures are left for evaluate()."""
        sources = [c.code for c in candidates if c.code and builds_extension(c.code)]
        if len(sources) > 1 or (alone and sources):
            await asyncio.to_thread(self.evaluator.prebuild, sources)

    async def evaluate(self, candidates: list[Candidate]) -> None:
        """Check and time the candidates one at a time (builds they still need happen here). The last
        one's evidence is left to follow its verdict (gather_evidence); an earlier one's runs before the
        next is judged, since it keeps that candidate's process alive and no kernel is timed beside one."""
        for index, candidate in enumerate(candidates):
            await self._evaluate(candidate)
            if index < len(candidates) - 1:
                await self.gather_evidence(candidate)

    async def gather_evidence(self, candidate: Candidate) -> None:
        """The evidence that follows the candidate's verdict, each part recorded as it finishes; cancelled,
        what finished is kept and the rest is recorded as cancelled."""
        later, verdict = candidate.evidence, candidate.verdict
        if later is None or verdict is None:
            return
        try:
            while (part := await asyncio.to_thread(later.next_part)) is not None:
                merge(verdict, part)
                self.record(self._evidence_event(candidate, part=part.name, evidence=part.evidence,
                                                 warnings=part.warnings, seconds=part.seconds))  # fmt: skip
        except asyncio.CancelledError:
            self.cancel_evidence(candidate)
            raise
        candidate.evidence = None

    def cancel_evidence(self, candidate: Candidate) -> None:
        """Stop the candidate's evidence (its running part dies with its process); what never finished is
        recorded as cancelled."""
        later, candidate.evidence = candidate.evidence, None
        if later is not None:
            later.cancel()
        if candidate.verdict is not None and (unfinished := pending(candidate.verdict)):
            cancel(candidate.verdict, unfinished)
            self.record(self._evidence_event(candidate, cancelled=unfinished))

    def _evidence_event(self, candidate: Candidate, **fields: Any) -> EvidenceEvent:
        ref = candidate.ref
        return EvidenceEvent(trajectory=ref.trajectory, turn=ref.turn, candidate=ref.candidate, **fields)

    async def edit(self, code: str, base: Candidate | None = None) -> Turn:
        """A kernel edited by hand becomes its own turn (candidate 0), to be evaluated and chosen."""
        number = self.next_number
        prompt = await self.build_prompt()
        turn = Turn(self.trajectory, number, prompt)
        parsed = ParsedReply(code, base.summary if base else None)
        ref = CandidateRef(self.trajectory, number, 0)
        turn.candidates.append(Candidate(ref, Reply(complete=True), parsed, parsed.summary, "user", edited_code=code))
        self.turns.append(turn)
        self.record(
            PromptEvent(
                trajectory=self.trajectory, turn=number, tokens=prompt.tokens, counted_with=prompt.counted_with,
                included=prompt.included, dropped=prompt.dropped, over_budget=prompt.over_budget, text=prompt.text,
            )
        )  # fmt: skip
        where = [base.ref.trajectory, base.ref.turn, base.ref.candidate] if base else None
        self.record(EditEvent(trajectory=self.trajectory, turn=number, code=code, base=where))
        return turn

    def choose(self, turn: Turn, index: int) -> Attempt:
        """The candidate enters the history later prompts show, in place of the turn's earlier choice."""
        candidate = turn.candidates[index]
        assert candidate.feedback is not None, "only an evaluated candidate can be chosen"
        turn.chosen = index
        attempt = make_attempt(
            turn.number, candidate.parsed, candidate.feedback, candidate.summary, candidate.edited_code
        )
        self.attempts = [a for a in self.attempts if a.number != turn.number] + [attempt]
        self.attempts.sort(key=lambda a: a.number)
        self.record(
            AttemptEvent(
                trajectory=self.trajectory, turn=turn.number, candidate=index, code=attempt.code,
                summary=attempt.summary, feedback=attempt.feedback, edited=attempt.edited_by_user,
            )
        )  # fmt: skip
        return attempt

    def stop(self) -> None:
        """Stop generation now; what already arrived is kept."""
        for task in self._streams:
            task.cancel()

    # -- internals ---------------------------------------------------------------

    async def _sample(self, turn: Turn) -> None:
        first = len(turn.candidates)
        try:
            replies = await self._stream(turn, first)
        except BackendError as exc:
            turn.failed = str(exc)
            self.record(ErrorEvent(trajectory=self.trajectory, turn=turn.number, message=str(exc)))
            raise
        for offset, reply in enumerate(replies):
            ref = CandidateRef(self.trajectory, turn.number, first + offset)
            candidate = Candidate(ref, reply, parse_reply(reply.answer, reply.reasoning))
            turn.candidates.append(candidate)
            await self._summarise(turn, candidate)

    async def _stream(self, turn: Turn, first: int) -> list[Reply]:
        assert turn.prompt is not None, "a turn without a recorded prompt cannot be sampled"
        prompt = turn.prompt
        replies = [Reply() for _ in range(self.config.candidates)]
        self.live = replies

        async def consume(reply: Reply) -> None:
            async for item in self.backend.stream(prompt.messages, self.config.sampling):
                if isinstance(item, StreamEnd):
                    reply.finish(item)
                else:
                    reply.add(item)

        self._streams = [asyncio.create_task(consume(r)) for r in replies]
        try:
            results = await asyncio.gather(*self._streams, return_exceptions=True)
        finally:
            for task in self._streams:
                task.cancel()
            self._streams = []
            self.live = []
            for offset, reply in enumerate(replies):
                self.record(
                    ReplyEvent(
                        trajectory=self.trajectory, turn=turn.number, candidate=first + offset,
                        reasoning=reply.reasoning, answer=reply.answer, complete=reply.complete,
                        finish_reason=reply.end.finish_reason, prompt_tokens=reply.end.prompt_tokens,
                        completion_tokens=reply.end.completion_tokens,
                    )
                )  # fmt: skip
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
            assert turn.prompt is not None
            messages, sampling = summary_request(turn.prompt, reply.answer, self.templates, self.config.sampling)
            try:
                follow_up: Reply | None = await collect(self.backend.stream(messages, sampling))
            except BackendError:
                follow_up = None
            candidate.summary, candidate.summary_source = summary_from(follow_up, reply.reasoning)
        self.record(
            KernelEvent(
                trajectory=self.trajectory, turn=turn.number, candidate=candidate.index, code=parsed.code,
                error=parsed.error, summary=candidate.summary, summary_source=candidate.summary_source,
            )
        )  # fmt: skip

    async def _evaluate(self, candidate: Candidate) -> None:
        self.listener(Evaluating(candidate.ref))
        if candidate.code is None:
            reason = candidate.parsed.error or "no code"
            if not candidate.reply.complete and candidate.edited_code is None:
                reason = f"generation was stopped before the answer was complete ({reason})"
            candidate.feedback = format_error_feedback(reason)
            verdict = Verdict(Status.FORMAT_ERROR, reason)
        else:
            verdict, candidate.evidence = await asyncio.to_thread(self.evaluator.judge, candidate.code)
            if verdict.details.get("reference_lost"):  # our failure, not the kernel's: once more, fresh
                self.record(ErrorEvent(trajectory=self.trajectory, turn=candidate.ref.turn, message=verdict.message,
                                       source="evaluator"))  # fmt: skip
                verdict, candidate.evidence = await asyncio.to_thread(self.evaluator.judge, candidate.code)
            candidate.feedback = feedback_from_verdict(verdict)  # the verdict's alone: no evidence is awaited
        candidate.verdict = verdict
        ref = candidate.ref
        self.record(EvaluationEvent(trajectory=ref.trajectory, turn=ref.turn, candidate=ref.candidate, verdict=verdict))


def _restored_candidate(record: CandidateRecord) -> Candidate:
    reply = Reply(complete=True)
    if record.reply is not None:
        event = record.reply
        reply = Reply(event.reasoning, event.answer, StreamEnd(event.finish_reason, event.prompt_tokens,
                                                               event.completion_tokens), event.complete)  # fmt: skip
    kernel = record.kernel
    parsed = ParsedReply(kernel.code, kernel.summary, kernel.error) if kernel else ParsedReply(record.code, None)
    verdict = record.verdict
    feedback = record.attempt.feedback if record.attempt else (feedback_from_verdict(verdict) if verdict else None)
    return Candidate(
        record.ref,
        reply,
        parsed,
        summary=record.summary,
        summary_source=kernel.summary_source if kernel else "user",
        feedback=feedback,
        verdict=verdict,
        edited_code=record.edit.code if record.edit else None,
    )
