"""Headless mode: run N turns without asking anything, one line (or JSON object) per finished turn.

Also `replay --headless` (the same per-turn lines from a saved session, optionally re-evaluated
here) and `sessions` (the list). Nothing here decides anything the loop does not: headless picks
the fastest correct candidate of each turn, as a user would by default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.loop import Turn
from kevin_tui.models.base import BackendError
from kevin_tui.protocol.prompt import best_attempt
from kevin_tui.repo import GitProblem
from kevin_tui.run import Run, RunError, accept_attempt, open_run, recorded_problem
from kevin_tui.session import Session, SessionError, candidate_key, load_session

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def turn_record(turn: int, candidate: int | None, status: str, speedup: float | None, message: str) -> dict:
    return {"turn": turn, "candidate": candidate, "status": status, "speedup": speedup, "message": message}


def print_turn(record: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(record), flush=True)
        return
    speed = f" {record['speedup']:.2f}x" if record.get("speedup") else ""
    which = f" (candidate {record['candidate'] + 1})" if record.get("candidate") else ""
    print(f"turn {record['turn']}: {record['status']}{speed}{which}: {record['message']}", flush=True)


async def run_headless(args: argparse.Namespace) -> int:
    try:
        async with open_run(args, _vllm_progress) as run:
            for notice in run.notices or []:
                print(f"kevin-tui: {notice}", file=sys.stderr)
            print(f"session: {run.writer.path}", file=sys.stderr)
            return await _turns(args, run)
    except RunError as exc:
        print(f"kevin-tui: {exc}", file=sys.stderr)
        return exc.exit_code
    except BackendError as exc:
        print(f"kevin-tui: {exc}", file=sys.stderr)
        if getattr(args, "session_id", None):
            print(f"kevin-tui: the session is saved (continue with --resume {args.session_id})", file=sys.stderr)
        return EXIT_FAILED


def _vllm_progress(elapsed: float, line: str) -> None:
    print(f"[vllm {elapsed:4.0f} s] {line}", file=sys.stderr)


async def _turns(args: argparse.Namespace, run: Run) -> int:
    agents, writer = run.agents, run.writer
    notes = list(args.note or [])
    try:
        for _ in range(args.turns):
            note = notes.pop(0) if notes else None
            # All trajectories generate at once; kernels are then checked and timed one at a time,
            # never while a generation is running on the same GPU.
            turns = await asyncio.gather(*(agent.generate_turn(note) for agent in agents))
            for agent, turn in zip(agents, turns, strict=True):
                await agent.evaluate_turn(turn)
                if turn.candidates:
                    best = turn.ranked()[0]
                    agent.choose(turn, best.index)
                    print_turn(_record_for(turn, best.index, agent.trajectory, len(agents)), args.json)
    except asyncio.CancelledError:
        writer.write("stop", reason="interrupted")
        print(f"\nkevin-tui: interrupted; the session is saved: {writer.path}", file=sys.stderr)
        return EXIT_INTERRUPTED
    best = best_attempt([a.best for a in agents if a.best is not None])
    if args.accept == "best" and best is not None:
        try:
            print(accept_attempt(run, best, args.git_init), file=sys.stderr)
        except GitProblem as exc:
            print(f"kevin-tui: not accepted: {exc} (the kernel is in the session)", file=sys.stderr)
    writer.write("end", turns=args.turns, best_speedup=best.correct_speedup if best else None)
    return EXIT_OK


def _record_for(turn: Turn, index: int, trajectory: int, trajectories: int) -> dict:
    candidate = turn.candidates[index]
    message = candidate.verdict.message if candidate.verdict else candidate.status
    record = turn_record(turn.number, index, candidate.status, candidate.speedup, message)
    if trajectories > 1:
        record["trajectory"] = trajectory
    return record


def replay_records(session: Session) -> list[dict]:
    """One record per turn: the chosen attempt's verdict, as headless printed it."""
    evaluations = session.by_candidate("evaluation")
    several = session.header.get("trajectories", 1) > 1
    records = []
    for attempt in session.of_type("attempt"):
        trajectory = attempt.get("trajectory", 0)
        verdict = evaluations.get(candidate_key(attempt), {}).get("verdict", {})
        record = turn_record(
            attempt["turn"],
            attempt["candidate"],
            verdict.get("status", "?"),
            verdict.get("speedup"),
            verdict.get("message", ""),
        )
        if several:
            record["trajectory"] = trajectory
        records.append(record)
    return records


def replay_headless(session: Session, args: argparse.Namespace) -> int:
    """The turns of a loaded session as headless printed them; with --reeval, judged again here."""
    records = replay_records(session)
    if not args.reeval:
        for record in records:
            _print_replay(record, args.json)
        return EXIT_OK
    kernels = {(a.get("trajectory", 0), a["turn"]): a["code"] for a in session.of_type("attempt")}
    with tempfile.TemporaryDirectory(prefix="kevin-replay-") as tmp:
        notices: list[str] = []
        problem = recorded_problem(session, Path(tmp) / "problem.py", notices)
        for notice in notices:
            print(f"kevin-tui: {notice}", file=sys.stderr)
        with Evaluator(problem, EvalOptions(device=args.device)) as evaluator:
            for record in records:
                kernel = kernels.get((record.get("trajectory", 0), record["turn"]))
                new = evaluator.evaluate(kernel) if kernel else None
                record["reeval"] = {
                    "status": new.status.value if new else "format_error",
                    "speedup": new.speedup if new else None,
                    "device": new.device if new else None,
                }
                _print_replay(record, args.json)
    return EXIT_OK


def _print_replay(record: dict, as_json: bool) -> None:
    if as_json or "reeval" not in record:
        print_turn(record, as_json)
        return
    new = record["reeval"]
    old_speed = f"{record['speedup']:.2f}x" if record.get("speedup") else "-"
    new_speed = f"{new['speedup']:.2f}x" if new.get("speedup") else "-"
    print(f"turn {record['turn']}: recorded {record['status']} {old_speed} | here {new['status']} {new_speed}")


def cmd_sessions(args: argparse.Namespace) -> int:
    directory = Path(args.sessions_dir)
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
        problem = Path(session.header["problem"]["path"]).name
        created = session.header.get("created", "")[:19].replace("T", " ")
        print(f"{session.id:<24} {created:<20} {problem:<32} {session.turns:>5} {best:>7} {session.state}")
    return EXIT_OK
