"""Session files: typed events round-trip, one writer shared by threads, the schema-1 migration and
the joins the front ends read."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from kevin_tui.evaluator.verdict import Status, Verdict
from kevin_tui.protocol.feedback import Feedback
from kevin_tui.session import CandidateRef, Header, SessionError, SessionWriter, load_session
from kevin_tui.session.events import (
    AcceptEvent,
    AttemptEvent,
    EvaluationEvent,
    KernelEvent,
    PromptEvent,
    ReplyEvent,
    RetryEvent,
    StopEvent,
    UnknownEvent,
    from_record,
    to_record,
)

EXAMPLE = Path(__file__).parents[1] / "sessions" / "example-relu.jsonl"


def header(**fields) -> Header:
    return Header(id="t", created="now", problem={"path": "p.py", "sha256": "x", "source": ""}, model="m",
                  backend="scripted", **fields)  # fmt: skip


def test_events_round_trip_through_json():
    verdict = Verdict(Status.CORRECT, "correct, 1.20x", speedup=1.2, speedup_interval=[1.1, 1.3])
    events = [
        PromptEvent(trajectory=1, turn=2, tokens=10, counted_with="estimate", text="hi"),
        EvaluationEvent(trajectory=1, turn=2, candidate=1, verdict=verdict),
        AttemptEvent(turn=2, candidate=1, code="c", summary="s", feedback=Feedback("correct", "ok", "", 1.2)),
        StopEvent(reason="quit"),
    ]
    for event in events:
        again = from_record(json.loads(json.dumps(to_record(event))))
        assert again == event
    assert from_record({"type": "evaluation", "turn": 1, "verdict": verdict.to_dict()}).verdict.speedup_interval == [
        1.1, 1.3,
    ]  # fmt: skip


def test_an_unknown_event_type_is_kept_and_unknown_fields_ignored():
    event = from_record({"type": "future", "time": 1.0, "x": 1})
    assert isinstance(event, UnknownEvent) and to_record(event) == {"type": "future", "time": 1.0, "x": 1}
    assert from_record({"type": "stop", "reason": "quit", "later": True}) == StopEvent(reason="quit")


def test_one_writer_shared_by_threads_writes_whole_lines(tmp_path):
    writer = SessionWriter(tmp_path / "s.jsonl", header())
    text = "x" * 5000  # long lines interleave if appends are not serialised

    def write(trajectory: int) -> None:
        for turn in range(50):
            writer.write(ReplyEvent(trajectory=trajectory, turn=turn, reasoning=text))

    threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    session = load_session(tmp_path / "s.jsonl")
    assert session.warning is None and len(session.of_type(ReplyEvent)) == 400
    assert all(e.time > 0 for e in session.events)


def test_a_session_file_never_appears_without_its_header(tmp_path):
    """A batch run lists its sessions folder while trajectories start (and a kill can land then): a
    file seen at all already holds its header."""
    done = threading.Event()
    seen: list[str] = []

    def create() -> None:
        for n in range(300):
            SessionWriter(tmp_path / f"s{n}.jsonl", header()).close()
        done.set()

    creator = threading.Thread(target=create)
    creator.start()
    while not done.is_set():
        for path in tmp_path.glob("*.jsonl"):
            try:
                load_session(path)
            except SessionError as e:
                seen.append(str(e))
    creator.join()
    assert seen == [] and len(list(tmp_path.glob("*.jsonl"))) == 300
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".jsonl")] == []


def test_an_event_written_after_close_is_still_saved(tmp_path):
    writer = SessionWriter(tmp_path / "s.jsonl", header())
    writer.write(PromptEvent(turn=1, tokens=1, counted_with="estimate"))
    writer.close()
    writer.write(ReplyEvent(turn=1))  # a worker winding down after the app closed the session
    writer.close()
    assert [e.type for e in load_session(tmp_path / "s.jsonl").events] == ["prompt", "reply"]


def test_the_shipped_schema_1_example_loads_migrated():
    session = load_session(EXAMPLE)
    assert session.migrated_from == 1 and session.header.trajectories == 1
    assert [r.ref.turn for r in session.chosen()] == [1, 2, 3, 4]
    assert [r.status for r in session.chosen()] == ["compile_error", "incorrect", "correct", "correct"]
    best = session.best()
    assert best is not None and best.ref == CandidateRef(0, 4, 0) and session.best_speedup == pytest.approx(0.528, 1e-2)
    assert [a.number for a in session.history(0)] == [1, 2, 3, 4] and session.state == "finished"


def test_a_schema_1_retry_is_renumbered_and_its_accept_names_the_candidate(tmp_path):
    """Schema 1 reused candidate indices when the app retried a turn: the migration gives the retry
    its own candidates, so no reply or verdict hides another."""
    verdict = {"status": "incorrect", "message": "wrong"}
    better = {"status": "correct", "message": "ok", "speedup": 1.5}
    feedback = {"status": "correct", "message": "ok", "detail": "", "speedup": 1.5}
    lines = [
        {"type": "header", "schema": 1, "id": "old", "created": "c", "problem": {"path": "p", "sha256": "s",
         "source": ""}, "model": "m", "backend": "b"},
        {"type": "prompt", "turn": 1, "tokens": 5, "counted_with": "estimate", "text": "p"},
        {"type": "reply", "turn": 1, "candidate": 0, "reasoning": "first"},
        {"type": "kernel", "turn": 1, "candidate": 0, "code": "A"},
        {"type": "evaluation", "turn": 1, "candidate": 0, "verdict": verdict},
        {"type": "prompt", "turn": 1, "tokens": 5, "counted_with": "estimate", "text": "p"},
        {"type": "reply", "turn": 1, "candidate": 0, "reasoning": "second"},
        {"type": "kernel", "turn": 1, "candidate": 0, "code": "B"},
        {"type": "evaluation", "turn": 1, "candidate": 0, "verdict": better},
        {"type": "attempt", "turn": 1, "candidate": 0, "code": "B", "summary": "s", "feedback": feedback},
        {"type": "accept", "turn": 1, "commit": "abc"},
    ]  # fmt: skip
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    session = load_session(path)
    records = session.candidates()
    assert [(r.ref.candidate, r.code, r.status) for r in records] == [(0, "A", "incorrect"), (1, "B", "correct")]
    assert records[0].reply.reasoning == "first" and records[1].reply.reasoning == "second"
    assert session.of_type(RetryEvent)[0].first_candidate == 1
    assert session.of_type(AcceptEvent)[0].candidate == 1 and records[1].accepts[0].commit == "abc"
    assert [a.code for a in session.history(0)] == ["B"]


def test_a_later_choice_for_a_turn_replaces_the_earlier_one(tmp_path):
    writer = SessionWriter(tmp_path / "s.jsonl", header())
    for candidate, code in ((0, "A"), (1, "B")):
        writer.write(KernelEvent(turn=1, candidate=candidate, code=code))
        writer.write(AttemptEvent(turn=1, candidate=candidate, code=code, feedback=Feedback("incorrect", "no")))
    writer.close()
    session = load_session(tmp_path / "s.jsonl")
    assert [r.code for r in session.chosen()] == ["B"] and len(session.history(0)) == 1


def test_a_newer_schema_is_refused_and_a_file_without_header_too(tmp_path):
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"type": "header", "schema": 99, "id": "x"}) + "\n")
    with pytest.raises(SessionError, match="newer kevin-tui"):
        load_session(newer)
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps({"type": "prompt", "turn": 1}) + "\n")
    with pytest.raises(SessionError, match="no header"):
        load_session(bare)


def test_a_damaged_session_is_cut_at_the_damage_before_anything_is_appended(tmp_path):
    """At every event boundary of a real session: a corrupt line (the rest after it too) or a write cut
    off by a kill. Reopened for appending, the file is cut there, so the new event is read back after
    the last good one; a corrupt line and what followed it are kept in FILE.corrupt, byte for byte.
    Before: the new events went after the corrupt line and no reader could ever load them."""
    lines = EXAMPLE.read_bytes().splitlines(keepends=True)
    for boundary in range(1, len(lines) + 1):
        for damage in (b'{"type": "reply", "turn"\n', b'{"type": "reply", "tu'):
            path = tmp_path / f"s-{boundary}-{len(damage)}.jsonl"
            rest = b"".join(lines[boundary:]) if damage.endswith(b"\n") else b""
            path.write_bytes(b"".join(lines[:boundary]) + damage + rest)
            warned = load_session(path).warning
            assert warned and f"line {boundary + 1}" in warned
            writer = SessionWriter(path)
            writer.write(StopEvent(reason="resumed and stopped"))
            writer.close()
            session = load_session(path)
            assert session.warning is None and len(session.events) == boundary  # header + boundary-1, + the stop
            assert session.events[-1] == StopEvent(reason="resumed and stopped", time=session.events[-1].time)
            kept = path.with_name(path.name + ".corrupt")
            if damage.endswith(b"\n"):
                assert kept.read_bytes() == damage + rest and "corrupt" in warned and kept.name in warned
            else:
                assert not kept.exists() and "incomplete" in warned
