"""Headless mode: the driver's turns printed one line (or JSON object) per finished turn.

Also `replay --headless` (the same lines from a saved session, optionally judged again here) and
`sessions` (the list). Nothing here decides anything: which candidate continues, what is best and
what is accepted are the driver's calls.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from kevin_tui.config import RunConfig
from kevin_tui.driver import Driver, ModelStarting, Notice, Report
from kevin_tui.errors import KevinError
from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.loop import Candidate
from kevin_tui.run import recorded_problem
from kevin_tui.session import CandidateRecord, Session, SessionError, load_session

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


def _print_report(report: Report) -> None:
    if isinstance(report, Notice):
        print(f"kevin-tui: {report.message}", file=sys.stderr)
    elif isinstance(report, ModelStarting):
        print(f"[vllm {report.elapsed_s:4.0f} s] {report.line}", file=sys.stderr)


def _record(candidate: Candidate, several: bool) -> dict:
    message = candidate.verdict.message if candidate.verdict else candidate.status
    ref = candidate.ref
    return turn_record(ref.turn, ref.candidate, candidate.status, candidate.speedup, message,
                       ref.trajectory if several else None)  # fmt: skip


async def run_headless(config: RunConfig) -> int:
    session: Path | None = None
    try:
        async with Driver.open(config, _print_report) as driver:
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


def replay_records(session: Session) -> list[dict]:
    """One record per turn: its chosen candidate's verdict, as headless printed it."""
    several = session.header.trajectories > 1
    return [_recorded(r, several) for r in session.chosen()]


def _recorded(record: CandidateRecord, several: bool) -> dict:
    verdict = record.verdict
    ref = record.ref
    return turn_record(ref.turn, ref.candidate, record.status, verdict.speedup if verdict else None,
                       verdict.message if verdict else "", ref.trajectory if several else None)  # fmt: skip


def replay_headless(session: Session, as_json: bool, reeval_device: str | None = None) -> int:
    """The turns of a loaded session as headless printed them; with a device, judged again there."""
    records = replay_records(session)
    if reeval_device is None:
        for record in records:
            print_turn(record, as_json)
        return EXIT_OK
    kernels = {(r.ref.trajectory, r.ref.turn): r.code for r in session.chosen()}
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
