"""What a session file holds: a header, then one typed event per thing that happened.

Each event is a dataclass; `to_record` and `from_record` are the only places that know the JSON
shape. Events about a turn carry its trajectory and number; events about one sampled reply also
carry its candidate index, unique within the turn (a retry adds candidates, it never reuses one).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from kevin_tui.evaluator.evidence import EvidencePart, cancel, merge
from kevin_tui.evaluator.verdict import Verdict, Warning_
from kevin_tui.protocol.feedback import Feedback

SCHEMA_VERSION = 2


@dataclass(frozen=True)
class CandidateRef:
    """One sampled (or edited) kernel: trajectory, turn number, candidate index."""

    trajectory: int
    turn: int
    candidate: int


@dataclass(kw_only=True)
class Header:
    id: str
    created: str
    problem: dict[str, str]  # path, sha256, source
    model: str
    backend: str
    sampling: dict[str, Any] = field(default_factory=dict)
    prompts_version: str = ""
    prompts: str = ""  # where the templates came from: a set, or "DIR (over SET)"
    prompts_files: dict[str, str] = field(default_factory=dict)  # each template file's hash (Templates.fingerprints)
    budget: int = 0
    candidates: int = 1
    trajectories: int = 1
    machine: dict[str, Any] = field(default_factory=dict)
    launch: dict[str, Any] = field(default_factory=dict)  # how the backend was started (resume reuses it)
    schema: int = SCHEMA_VERSION


@dataclass(kw_only=True)
class Event:
    type: ClassVar[str] = ""
    time: float = 0.0


@dataclass(kw_only=True)
class TurnEvent(Event):
    trajectory: int = 0
    turn: int


@dataclass(kw_only=True)
class CandidateEvent(TurnEvent):
    candidate: int = 0

    @property
    def ref(self) -> CandidateRef:
        return CandidateRef(self.trajectory, self.turn, self.candidate)


@dataclass(kw_only=True)
class PromptEvent(TurnEvent):
    type: ClassVar[str] = "prompt"
    tokens: int
    counted_with: str
    included: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    over_budget: bool = False
    text: str = ""


@dataclass(kw_only=True)
class RetryEvent(TurnEvent):
    """The turn is sampled again from the same prompt; new candidates start at `first_candidate`."""

    type: ClassVar[str] = "retry"
    first_candidate: int


@dataclass(kw_only=True)
class ReplyEvent(CandidateEvent):
    type: ClassVar[str] = "reply"
    reasoning: str = ""
    answer: str = ""
    complete: bool = False
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(kw_only=True)
class KernelEvent(CandidateEvent):
    type: ClassVar[str] = "kernel"
    code: str | None = None
    error: str | None = None
    summary: str | None = None
    summary_source: str = "reply"


@dataclass(kw_only=True)
class EvaluationEvent(CandidateEvent):
    type: ClassVar[str] = "evaluation"
    verdict: Verdict


@dataclass(kw_only=True)
class EvidenceEvent(CandidateEvent):
    """A part of the evidence that follows a correct verdict (kevin_tui/evaluator/evidence.py) finished
    (`part`, with what it found), or the parts in `cancelled` never will."""

    type: ClassVar[str] = "evidence"
    part: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    warnings: list[Warning_] = field(default_factory=list)
    seconds: float = 0.0
    cancelled: list[str] = field(default_factory=list)

    def apply(self, verdict: Verdict) -> None:
        """What this event says, joined to the candidate's verdict."""
        if self.part:
            merge(verdict, EvidencePart(self.part, self.evidence, self.warnings, self.seconds))
        cancel(verdict, self.cancelled)


@dataclass(kw_only=True)
class AttemptEvent(CandidateEvent):
    """The candidate that enters the history later prompts show; a later one for the same turn replaces it."""

    type: ClassVar[str] = "attempt"
    code: str | None = None
    summary: str = ""
    feedback: Feedback
    edited: bool = False


@dataclass(kw_only=True)
class NoteEvent(TurnEvent):
    type: ClassVar[str] = "note"
    text: str


@dataclass(kw_only=True)
class EditEvent(TurnEvent):
    """A kernel the user edited by hand; it is candidate 0 of its own turn."""

    type: ClassVar[str] = "edit"
    code: str
    base: list[int] | None = None  # [trajectory, turn, candidate] of the kernel it was edited from


@dataclass(kw_only=True)
class AcceptEvent(CandidateEvent):
    type: ClassVar[str] = "accept"
    commit: str | None = None
    path: str | None = None
    error: str | None = None
    speedup: float | None = None


@dataclass(kw_only=True)
class ApplyEvent(Event):
    """An accepted kernel installed in the user's model by `kevin-tui apply`: the helper, its commit,
    and the end-to-end check (`passed` None: not checked)."""

    type: ClassVar[str] = "apply"
    kernel: str
    helper: str
    commit: str | None = None
    model: str | None = None
    passed: bool | None = None
    check: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class UndoEvent(Event):
    type: ClassVar[str] = "undo"
    message: str


@dataclass(kw_only=True)
class ErrorEvent(Event):
    type: ClassVar[str] = "error"
    message: str
    trajectory: int = 0
    turn: int | None = None
    source: str = "backend"  # or "evaluator": the reference worker was lost and the kernel judged again


@dataclass(kw_only=True)
class StopEvent(Event):
    type: ClassVar[str] = "stop"
    reason: str


@dataclass(kw_only=True)
class ResumeEvent(Event):
    type: ClassVar[str] = "resume"
    turn: int


@dataclass(kw_only=True)
class EndEvent(Event):
    type: ClassVar[str] = "end"
    turns: int
    best_speedup: float | None = None


@dataclass(kw_only=True)
class UnknownEvent(Event):
    """An event type this version does not know (kept, so nothing is lost on load)."""

    kind: str = "?"
    data: dict[str, Any] = field(default_factory=dict)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        PromptEvent, RetryEvent, ReplyEvent, KernelEvent, EvaluationEvent, EvidenceEvent, AttemptEvent, NoteEvent,
        EditEvent,
        AcceptEvent, ApplyEvent, UndoEvent, ErrorEvent, StopEvent, ResumeEvent, EndEvent,
    )
}  # fmt: skip


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls) if f.init}
    return {k: v for k, v in data.items() if k in names}


def to_record(event: Event | Header) -> dict[str, Any]:
    """The JSON object written for an event (or the header)."""
    if isinstance(event, Header):
        return {"type": "header", **asdict(event)}
    if isinstance(event, UnknownEvent):
        return {"type": event.kind, "time": event.time, **event.data}
    data = {f.name: getattr(event, f.name) for f in fields(event)}
    if isinstance(event, EvaluationEvent):
        data["verdict"] = event.verdict.to_dict()
    elif isinstance(event, AttemptEvent):
        data["feedback"] = asdict(event.feedback)
    elif isinstance(event, EvidenceEvent):
        data["warnings"] = [asdict(w) for w in event.warnings]
    return {"type": event.type, **data}


def from_record(record: dict[str, Any]) -> Event:
    """The typed event for a JSON object (unknown fields are ignored, unknown types kept as they are)."""
    kind = record["type"]
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        data = {k: v for k, v in record.items() if k not in ("type", "time")}
        return UnknownEvent(kind=kind, time=record.get("time", 0.0), data=data)
    data = _known(cls, record)
    if cls is EvaluationEvent:
        data["verdict"] = Verdict.from_dict(record["verdict"])
    elif cls is AttemptEvent:
        data["feedback"] = Feedback(**_known(Feedback, record["feedback"]))
    elif cls is EvidenceEvent:
        data["warnings"] = [Warning_(**_known(Warning_, w)) for w in record.get("warnings") or []]
    return cls(**data)


def header_from_record(record: dict[str, Any]) -> Header:
    return Header(**_known(Header, record))
