"""The one reader of session files: load (tolerating a cut-off last line), migrate old schemas, and
join each candidate's prompt, reply, kernel, evaluation, choice and edit into one record, for
resume, replay, the app and `kevin-tui sessions`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from kevin_tui.errors import EXIT_USAGE, KevinError
from kevin_tui.evaluator.evidence import cancel, pending
from kevin_tui.evaluator.verdict import Verdict
from kevin_tui.protocol.prompt import Attempt
from kevin_tui.ranking import Score, best_correct
from kevin_tui.session.events import (
    SCHEMA_VERSION,
    AcceptEvent,
    AttemptEvent,
    CandidateEvent,
    CandidateRef,
    EditEvent,
    EvaluationEvent,
    Event,
    EvidenceEvent,
    Header,
    KernelEvent,
    PromptEvent,
    ReplyEvent,
    from_record,
    header_from_record,
)

SUFFIX = ".jsonl"
E = TypeVar("E", bound=Event)
Record = dict[str, Any]


def copy_of(verdict: Verdict) -> Verdict:
    return Verdict.from_dict(verdict.to_dict())


class SessionError(KevinError):
    exit_code = EXIT_USAGE


@dataclass
class CandidateRecord:
    """Everything recorded about one candidate, joined."""

    ref: CandidateRef
    prompt: PromptEvent | None = None
    reply: ReplyEvent | None = None
    kernel: KernelEvent | None = None
    evaluation: EvaluationEvent | None = None
    attempt: AttemptEvent | None = None  # set while this is the chosen candidate of its turn
    edit: EditEvent | None = None
    accepts: list[AcceptEvent] = field(default_factory=list)

    @property
    def code(self) -> str | None:
        if self.edit is not None:
            return self.edit.code
        return self.kernel.code if self.kernel else (self.attempt.code if self.attempt else None)

    @property
    def summary(self) -> str | None:
        return self.attempt.summary if self.attempt else (self.kernel.summary if self.kernel else None)

    @property
    def verdict(self) -> Verdict | None:
        return self.evaluation.verdict if self.evaluation else None

    @property
    def status(self) -> str:
        if self.evaluation:
            return self.evaluation.verdict.status.value
        return self.attempt.feedback.status if self.attempt else "pending"

    @property
    def score(self) -> Score:
        verdict = self.verdict
        if verdict is None:
            return Score(self.status)
        return Score(verdict.status.value, verdict.speedup, verdict.speedup_interval)


@dataclass
class Session:
    path: Path
    header: Header
    events: list[Event] = field(default_factory=list)
    warning: str | None = None
    migrated_from: int | None = None

    @property
    def id(self) -> str:
        return self.header.id

    def of_type(self, cls: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, cls)]

    def candidates(self) -> list[CandidateRecord]:
        """Every candidate in the order it first appeared, joined with what happened to it."""
        records: dict[CandidateRef, CandidateRecord] = {}
        prompts: dict[tuple[int, int], PromptEvent] = {}
        chosen: dict[tuple[int, int], CandidateRecord] = {}
        event_verdicts: dict[CandidateRef, Verdict] = {}
        for event in self.events:
            if isinstance(event, PromptEvent):
                prompts[(event.trajectory, event.turn)] = event
                continue
            if isinstance(event, EditEvent):
                ref = CandidateRef(event.trajectory, event.turn, 0)
            elif isinstance(event, CandidateEvent):
                ref = event.ref
            else:
                continue
            record = records.get(ref)
            if record is None:
                record = records[ref] = CandidateRecord(ref, prompts.get((ref.trajectory, ref.turn)))
            if isinstance(event, ReplyEvent):
                record.reply = event
            elif isinstance(event, KernelEvent):
                record.kernel = event
            elif isinstance(event, EvaluationEvent):
                record.evaluation = event
            elif isinstance(event, EvidenceEvent) and record.evaluation is not None:
                if record.evaluation.verdict is event_verdicts.get(ref):  # the event's own is never changed
                    record.evaluation = replace(record.evaluation, verdict=copy_of(record.evaluation.verdict))
                event.apply(record.evaluation.verdict)
            elif isinstance(event, EditEvent):
                record.edit = event
            elif isinstance(event, AcceptEvent):
                record.accepts.append(event)
            elif isinstance(event, AttemptEvent):
                previous = chosen.get((ref.trajectory, ref.turn))
                if previous is not None:  # chosen again after a retry: the new choice replaces it
                    previous.attempt = None
                record.attempt = event
                chosen[(ref.trajectory, ref.turn)] = record
            if isinstance(event, EvaluationEvent):
                event_verdicts[ref] = event.verdict
        for record in records.values():  # a loaded session runs nothing: what never came was cut short
            evaluation = record.evaluation
            if evaluation is not None and (unfinished := pending(evaluation.verdict)):
                record.evaluation = replace(evaluation, verdict=copy_of(evaluation.verdict))
                cancel(record.evaluation.verdict, unfinished)
        return list(records.values())

    def chosen(self) -> list[CandidateRecord]:
        """The candidates that entered the history, by turn, then trajectory."""
        chosen = [r for r in self.candidates() if r.attempt is not None]
        return sorted(chosen, key=lambda r: (r.ref.turn, r.ref.trajectory))

    def history(self, trajectory: int) -> list[Attempt]:
        """The attempts later prompts show for one trajectory, as the loop had them."""
        return [
            Attempt(r.ref.turn, r.attempt.code, r.attempt.summary, r.attempt.feedback, r.attempt.edited)
            for r in self.chosen()
            if r.attempt is not None and r.ref.trajectory == trajectory
        ]

    def best(self) -> CandidateRecord | None:
        return best_correct(self.candidates(), lambda r: r.score)

    @property
    def best_speedup(self) -> float | None:
        best = self.best()
        return best.score.speedup if best else None

    @property
    def turns(self) -> int:
        return max((getattr(e, "turn", None) or 0 for e in self.events), default=0)

    @property
    def state(self) -> str:
        if self.warning:
            return "interrupted"
        last = self.events[-1].type if self.events else "new"
        return {"stop": "stopped", "end": "finished"}.get(last, "interrupted")


def _v1_to_v2(records: list[Record]) -> list[Record]:
    """Schema 1 → 2: every turn event gets its trajectory and candidate; a retried turn's candidates
    are renumbered after the earlier ones (schema 1 reused the indices); an accept names its candidate."""
    offset: dict[tuple[int, int], int] = {}
    count: dict[tuple[int, int], int] = {}
    chosen: dict[tuple[int, int], int] = {}
    out = []
    for old in records:
        record = dict(old)
        kind = record["type"]
        if kind == "header":
            record.setdefault("trajectories", 1)
            record.setdefault("candidates", 1)
        elif "turn" in record and kind not in ("resume", "end"):
            record.setdefault("trajectory", 0)
            key = (record["trajectory"], record["turn"])
            if kind == "prompt" and key in count:  # a second prompt for a turn: schema 1's retry
                offset[key] = count[key]
                out.append({"type": "retry", "time": record.get("time", 0.0), "trajectory": key[0],
                            "turn": key[1], "first_candidate": count[key]})  # fmt: skip
            elif kind in ("reply", "kernel", "evaluation", "attempt"):
                record["candidate"] = record.get("candidate", 0) + offset.get(key, 0)
                count[key] = max(count.get(key, 0), record["candidate"] + 1)
                if kind == "attempt":
                    chosen[key] = record["candidate"]
            elif kind == "accept":
                record.setdefault("candidate", chosen.get(key, 0))
        out.append(record)
    return out


MIGRATIONS: dict[int, Callable[[list[Record]], list[Record]]] = {1: _v1_to_v2}


def migrate(records: list[Record], schema: int) -> list[Record]:
    """Bring records written with an older schema up to the current one, one step at a time."""
    while schema < SCHEMA_VERSION:
        records = MIGRATIONS[schema](records)
        schema += 1
    return records


def _event_record(line: bytes) -> Record | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) and "type" in record else None


def first_damage(raw: bytes) -> int | None:
    """The byte offset where the first line that is not an event starts (cut off by a kill, or
    corrupt), None if every line is one. Everything a reader loads lies before it."""
    offset = 0
    for line in raw.split(b"\n"):
        if line.strip() and _event_record(line) is None:
            return offset
        offset += len(line) + 1
    return None


def corrupt_path(path: Path) -> Path:
    """Where the lines from a damaged one on are kept when the session is appended to."""
    return path.with_name(path.name + ".corrupt")


def read_records(path: Path) -> tuple[list[Record], str | None]:
    """The JSON objects in a session file, and a warning if a line was cut off or corrupt."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SessionError(f"{path}: no such session file") from None
    except OSError as exc:
        raise SessionError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    damage = first_damage(raw)
    good = raw if damage is None else raw[:damage]
    records = [r for line in good.split(b"\n") if line.strip() and (r := _event_record(line)) is not None]
    if damage is None:
        return records, None
    number = raw[:damage].count(b"\n") + 1
    incomplete = b"\n" not in raw[damage:]  # an unterminated last line: a write cut off by a kill
    what = "is incomplete (the session was interrupted while writing it)" if incomplete else "is corrupt"
    kept = f"; resuming moves it and the rest to {corrupt_path(path).name} first" if not incomplete else ""
    return records, f"{path}: line {number} {what}; loaded the {len(records)} lines before it{kept}"


def load_session(path: Path) -> Session:
    records, warning = read_records(path)
    if not records or records[0]["type"] != "header":
        raise SessionError(f"{path}: not a kevin-tui session (no header line)")
    schema = records[0].get("schema", 1)
    if schema > SCHEMA_VERSION:
        raise SessionError(f"{path}: written by a newer kevin-tui (schema {schema}); upgrade to read it")
    records = migrate(records, schema)
    try:
        header = header_from_record(records[0])
        events = [from_record(r) for r in records[1:]]
    except (KeyError, TypeError, ValueError) as exc:
        raise SessionError(f"{path}: an event is malformed ({type(exc).__name__}: {exc})") from None
    return Session(path, header, events, warning, schema if schema < SCHEMA_VERSION else None)


def session_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime)


def find_session(directory: Path, which: str) -> Path:
    """`last`, a session id, or a path."""
    if which == "last":
        files = session_files(directory)
        if not files:
            raise SessionError(f"no sessions in {directory}")
        return files[-1]
    candidate = Path(which)
    if candidate.exists():
        return candidate
    matches = [p for p in session_files(directory) if p.stem.startswith(which)]
    if len(matches) != 1:
        raise SessionError(f"{'no' if not matches else 'more than one'} session in {directory} matches {which!r}")
    return matches[0]
