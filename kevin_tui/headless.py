"""Headless mode: the driver's turns printed one line (or JSON object) per finished turn.

Also `replay --headless` (the same lines from a saved session, optionally judged again here) and
`sessions` (the list). Nothing here decides anything: which candidate continues, what is best and
what is accepted are the driver's calls.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from kevin_tui.config import RunConfig
from kevin_tui.driver import Driver, Evidenced, ModelStarting, Notice, Report
from kevin_tui.errors import KevinError
from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.evaluator.evidence import PART_NAMES
from kevin_tui.evaluator.report import evidence_lines
from kevin_tui.judge import JudgeFactory
from kevin_tui.loop import Candidate
from kevin_tui.protocol.notes import profile_note
from kevin_tui.ranking import ranked
from kevin_tui.run import recorded_problem
from kevin_tui.session import CandidateRecord, Session, SessionError, load_session
from kevin_tui.session.events import AcceptEvent, ApplyEvent, EvidenceEvent, UndoEvent

EXIT_OK = 0


def turn_record(
    turn: int, candidate: int | None, status: str, speedup: float | None, message: str, trajectory: int | None
) -> dict:
    record = {"turn": turn, "candidate": candidate, "status": status, "speedup": speedup, "message": message}
    if trajectory is not None:
        record["trajectory"] = trajectory
    return record


def print_turn(record: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(record), flush=True)
        return
    speed = f" {record['speedup']:.2f}x" if record.get("speedup") else ""
    which = f" (candidate {record['candidate'] + 1})" if record.get("candidate") else ""
    where = f"[{record['trajectory'] + 1}] " if "trajectory" in record else ""
    print(f"{where}turn {record['turn']}: {record['status']}{speed}{which}: {record['message']}", flush=True)


def evidence_record(event: EvidenceEvent | Evidenced, several: bool) -> dict:
    """Evidence that followed a verdict (one part, or the parts cancelled), as headless prints it."""
    ref = event.ref
    record = {"event": "evidence", "turn": ref.turn, "candidate": ref.candidate, "part": event.part,
              "cancelled": list(event.cancelled), "evidence": event.evidence}  # fmt: skip
    if several:
        record["trajectory"] = ref.trajectory
    return record


def evidence_line(record: dict) -> str:
    where = f"[{record['trajectory'] + 1}] " if "trajectory" in record else ""
    which = f" (candidate {record['candidate'] + 1})" if record["candidate"] else ""
    head = f"{where}turn {record['turn']}{which}"
    if record["cancelled"]:
        return f"{head}: {', '.join(PART_NAMES.get(p, p) for p in record['cancelled'])}: cancelled"
    part, evidence = record["part"], record["evidence"]
    if part == "profile" and evidence.get("profile"):
        return f"{head}: {profile_note(evidence, limit=3)}"
    return f"{head}: " + "; ".join(line.strip() for line in evidence_lines(evidence))


def print_evidence(record: dict, as_json: bool) -> None:
    print(json.dumps(record) if as_json else evidence_line(record), flush=True)


def reporter(as_json: bool, several: bool) -> Callable[[Report], None]:
    """Headless mode's reporter: notices to stderr, the evidence after each verdict to stdout as it comes."""

    def report(report: Report) -> None:
        if isinstance(report, Notice):
            print(f"kevin-tui: {report.message}", file=sys.stderr)
        elif isinstance(report, ModelStarting):
            print(f"[vllm {report.elapsed_s:4.0f} s] {report.line}", file=sys.stderr)
        elif isinstance(report, Evidenced):
            print_evidence(evidence_record(report, several), as_json)

    return report


def _record(candidate: Candidate, several: bool) -> dict:
    message = candidate.verdict.message if candidate.verdict else candidate.status
    ref = candidate.ref
    return turn_record(ref.turn, ref.candidate, candidate.status, candidate.speedup, message,
                       ref.trajectory if several else None)  # fmt: skip


async def run_headless(config: RunConfig, judge: JudgeFactory = Evaluator) -> int:
    """The turns asked for, printed as they finish; `judge` is the evaluator (a test's judge in tests)."""
    session: Path | None = None
    try:
        async with Driver.open(config, reporter(config.json, config.problem.trajectories > 1), judge) as driver:
            session = driver.session_path
            print(f"session: {session}", file=sys.stderr)
            notes = list(config.notes)
            for _ in range(config.turns):
                await driver.advance(notes.pop(0) if notes else None)
                for trajectory in range(driver.trajectories):
                    if (candidate := driver.continuing(trajectory)) is not None:
                        print_turn(_record(candidate, driver.trajectories > 1), config.json)
            if config.accept == "best":
                outcome = await driver.accept_best(config.accept_slower, config.git_init)
                print(f"kevin-tui: {outcome.without_dialog}", file=sys.stderr)
            await driver.finish()
    except KevinError as exc:
        print(f"kevin-tui: {exc}", file=sys.stderr)
        if session is not None and session.exists():
            print(f"kevin-tui: the session is saved (continue with --resume {session.stem})", file=sys.stderr)
        return exc.exit_code
    return EXIT_OK


def judged_turns(session: Session) -> list[CandidateRecord]:
    """One candidate per judged turn, by turn then trajectory: the one that entered the history, else
    (the session stopped before the next turn chose) the best judged, as the driver would continue."""
    turns: dict[tuple[int, int], list[CandidateRecord]] = {}
    for record in session.candidates():
        if record.evaluation is not None or record.attempt is not None:
            turns.setdefault((record.ref.turn, record.ref.trajectory), []).append(record)
    picked = []
    for key in sorted(turns):
        group = turns[key]
        chosen = [r for r in group if r.attempt is not None]
        picked.append(chosen[0] if chosen else ranked(group, lambda r: r.score)[0])
    return picked


def replay_records(session: Session) -> list[dict]:
    """One record per judged turn, as headless printed it."""
    several = session.header.trajectories > 1
    return [_recorded(r, several) for r in judged_turns(session)]


def action_records(session: Session) -> list[dict]:
    """What was done with the kernels, in order: accepts (and refusals), applies, undos."""
    records: list[dict] = []
    for event in session.events:
        if isinstance(event, AcceptEvent):
            records.append({"event": "accept", "trajectory": event.trajectory, "turn": event.turn,
                            "candidate": event.candidate, "commit": event.commit, "path": event.path,
                            "error": event.error})  # fmt: skip
        elif isinstance(event, ApplyEvent):
            records.append({"event": "apply", "kernel": event.kernel, "helper": event.helper, "commit": event.commit,
                            "model": event.model, "passed": event.passed})  # fmt: skip
        elif isinstance(event, UndoEvent):
            records.append({"event": "undo", "message": event.message})
    return records


def action_line(record: dict) -> str:
    if record["event"] == "accept":
        which = f"turn {record['turn']}" + (f" (candidate {record['candidate'] + 1})" if record["candidate"] else "")
        if record["error"]:
            return f"not accepted {which}: {record['error']}"
        return f"accepted {which}: {record['path']} committed {(record['commit'] or '')[:10]}"
    if record["event"] == "apply":
        check = {True: "outputs match", False: "outputs differ", None: "not checked"}[record["passed"]]
        model = f" in {record['model']}" if record["model"] else ""
        return f"applied {record['kernel']}{model} ({check}): helper {record['helper']}"
    return f"undo: {record['message']}"


def print_action(record: dict, as_json: bool) -> None:
    print(json.dumps(record) if as_json else action_line(record), flush=True)


def _recorded(record: CandidateRecord, several: bool) -> dict:
    verdict = record.verdict
    ref = record.ref
    return turn_record(ref.turn, ref.candidate, record.status, verdict.speedup if verdict else None,
                       verdict.message if verdict else "", ref.trajectory if several else None)  # fmt: skip


def replay_headless(session: Session, as_json: bool, reeval_device: str | None = None) -> int:
    """The turns of a loaded session as headless printed them; with a device, judged again there."""
    records = replay_records(session)
    if reeval_device is None:
        several = session.header.trajectories > 1
        evidence = session.of_type(EvidenceEvent)
        for record in records:
            print_turn(record, as_json)
            turn = (record.get("trajectory", 0), record["turn"])
            for event in (e for e in evidence if (e.trajectory, e.turn) == turn):
                print_evidence(evidence_record(event, several), as_json)
        for action in action_records(session):
            print_action(action, as_json)
        return EXIT_OK
    kernels = {(r.ref.trajectory, r.ref.turn): r.code for r in judged_turns(session)}
    with tempfile.TemporaryDirectory(prefix="kevin-replay-") as tmp:
        notices: list[str] = []
        problem = recorded_problem(session, Path(tmp) / "problem.py", notices)
        for notice in notices:
            print(f"kevin-tui: {notice}", file=sys.stderr)
        with Evaluator(problem, EvalOptions(device=reeval_device)) as evaluator:
            for record in records:
                kernel = kernels.get((record.get("trajectory", 0), record["turn"]))
                new = evaluator.evaluate(kernel) if kernel else None
                record["reeval"] = {
                    "status": new.status.value if new else "format_error",
                    "speedup": new.speedup if new else None,
                    "device": new.device if new else None,
                }
                _print_replay(record, as_json)
    return EXIT_OK


def _print_replay(record: dict, as_json: bool) -> None:
    if as_json:
        print_turn(record, as_json)
        return
    new = record["reeval"]
    old_speed = f"{record['speedup']:.2f}x" if record.get("speedup") else "-"
    new_speed = f"{new['speedup']:.2f}x" if new.get("speedup") else "-"
    print(f"turn {record['turn']}: recorded {record['status']} {old_speed} | here {new['status']} {new_speed}")


def list_sessions(directory: Path) -> int:
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        print(f"no sessions in {directory}")
        return EXIT_OK
    print(f"{'session':<24} {'date':<20} {'problem':<32} {'turns':>5} {'best':>7} state")
    for path in files:
        try:
            session = load_session(path)
        except SessionError as exc:
            print(f"{path.stem:<24} unreadable: {exc}")
            continue
        best = f"{session.best_speedup:.2f}x" if session.best_speedup else "-"
        problem = Path(session.header.problem["path"]).name
        created = session.header.created[:19].replace("T", " ")
        print(f"{session.id:<24} {created:<20} {problem:<32} {session.turns:>5} {best:>7} {session.state}")
    return EXIT_OK
