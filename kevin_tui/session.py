"""Sessions: one JSON-lines file each, a header then one event per thing that happened.

Every event is appended and flushed as it happens, so a crash, SIGKILL or Ctrl-C loses at most the
stream in flight. Loading tolerates a truncated or corrupt line (the write a kill interrupted): it
loads everything before it and says so. The schema is versioned.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
SUFFIX = ".jsonl"


class SessionError(Exception):
    pass


def candidate_key(event: dict[str, Any]) -> tuple[int, int, int]:
    return (event.get("trajectory", 0), event["turn"], event.get("candidate", 0))


def new_session_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


@dataclass
class Session:
    path: Path
    header: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    warning: str | None = None

    @property
    def id(self) -> str:
        return self.header["id"]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def by_candidate(self, kind: str) -> dict[tuple[int, int, int], dict[str, Any]]:
        """Events of one kind keyed by (trajectory, turn, candidate), to join replies, verdicts, attempts."""
        return {candidate_key(e): e for e in self.of_type(kind)}

    @property
    def turns(self) -> int:
        return max((e.get("turn", 0) for e in self.events), default=0)

    @property
    def best_speedup(self) -> float | None:
        speeds = [
            e["verdict"].get("speedup") for e in self.of_type("evaluation") if e["verdict"]["status"] == "correct"
        ]
        speeds = [s for s in speeds if s is not None]
        return max(speeds) if speeds else None

    @property
    def state(self) -> str:
        if self.warning:
            return "interrupted"
        last = self.events[-1]["type"] if self.events else "new"
        return {"stop": "stopped", "end": "finished"}.get(last, "interrupted")


class SessionWriter:
    """Appends events to a session file, each flushed to the OS before `write` returns."""

    def __init__(self, path: Path, header: dict[str, Any] | None = None) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists() or path.stat().st_size == 0
        if new and header is None:
            raise SessionError(f"{path}: a new session needs a header")
        if not new:
            _repair_tail(path)
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the session's life
        if new:
            self._append({"type": "header", "schema": SCHEMA_VERSION, **(header or {})})

    def _append(self, record: dict[str, Any]) -> None:
        if self.file.closed:  # a late event (a worker winding down after close): still saved
            self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self.file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.file.flush()

    def write(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "time": round(time.time(), 3), **fields}
        self._append(event)
        return event

    def sync(self) -> None:
        """Force the file to disk (flush already protects against a killed process)."""
        os.fsync(self.file.fileno())

    def close(self) -> None:
        if not self.file.closed:
            self.file.close()


def _repair_tail(path: Path) -> None:
    """Before appending to an interrupted session, drop a last line that was cut off mid-write."""
    with open(path, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


def load_session(path: Path) -> Session:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SessionError(f"{path}: no such session file") from None
    except OSError as exc:
        raise SessionError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    lines = raw.split(b"\n")
    records: list[dict[str, Any]] = []
    warning = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or "type" not in record:
                raise ValueError("not an event")
        except ValueError:
            incomplete = number == len(lines) or (number == len(lines) - 1 and not lines[-1])
            what = "is incomplete (the session was interrupted while writing it)" if incomplete else "is corrupt"
            warning = f"{path}: line {number} {what}; loaded the {len(records)} lines before it"
            break
        records.append(record)
    if not records or records[0]["type"] != "header":
        raise SessionError(f"{path}: not a kevin-tui session (no header line)")
    header = records[0]
    if header.get("schema", 0) > SCHEMA_VERSION:
        raise SessionError(f"{path}: written by a newer kevin-tui (schema {header['schema']}); upgrade to read it")
    return Session(path, header, records[1:], warning)


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
