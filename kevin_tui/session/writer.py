"""The one writer of a session file: appends typed events, each flushed before `write` returns.

Threads write too (git accepts, evaluator progress), so appends are serialised by a lock. A crash,
SIGKILL or Ctrl-C loses at most the event being written; reopening an interrupted file cuts a line
that a kill left half-written before appending.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from kevin_tui.session.events import Event, Header, to_record
from kevin_tui.session.reader import SessionError, corrupt_path, first_damage

E = TypeVar("E", bound=Event)


def new_session_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


class SessionWriter:
    """Appends events to a session file; a new file is created with its header when opened."""

    def __init__(self, path: Path, header: Header | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        new = not path.exists() or path.stat().st_size == 0
        if new and header is None:
            raise SessionError(f"{path}: a new session needs a header")
        path.parent.mkdir(parents=True, exist_ok=True)
        if new:
            assert header is not None
            _create_with_header(path, to_record(header))
        else:
            _repair_tail(path)
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the session's life

    def _append(self, record: dict[str, Any]) -> None:
        if self.file.closed:  # a late event (a worker winding down after close): still saved
            self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self.file.write(json_line(record))
        self.file.flush()

    def write(self, event: E) -> E:
        """Stamp the event with the time, append it, and return it."""
        event = dataclasses.replace(event, time=round(time.time(), 3))
        with self._lock:
            self._append(to_record(event))
        return event

    def close(self) -> None:
        with self._lock:
            if not self.file.closed:
                self.file.close()


def json_line(record: dict[str, Any]) -> str:
    """One line of JSON that UTF-8 can hold: text as it is, unless a string holds what UTF-8 cannot (a lone
    surrogate, which a server's or a worker's JSON can escape), then that line escaped (loads back the same)."""
    text = json.dumps(record, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(record, default=str)
    return text + "\n"


def _create_with_header(path: Path, header: dict[str, Any]) -> None:
    """A session file appears with its header already in it (written aside, then renamed into
    place): a reader listing the folder, or a kill at that moment, never meets a headerless file."""
    aside = path.with_name(f".{path.name}.{secrets.token_hex(4)}.new")
    aside.write_text(json_line(header), encoding="utf-8")
    os.replace(aside, path)


def _repair_tail(path: Path) -> None:
    """Before appending, cut the file at its first damaged line (a reader stops there, so anything
    appended after it would never be read): a last line cut off mid-write is dropped; a corrupt line
    and everything after it are moved to PATH.corrupt (appended there: nothing is lost)."""
    with open(path, "rb+") as f:
        data = f.read()
        damage = first_damage(data)
        if damage is None:
            if data and not data.endswith(b"\n"):  # a complete last event without its newline
                f.write(b"\n")
            return
        rest = data[damage:]
        if b"\n" in rest:  # a whole corrupt line, not one cut off by a kill mid-write
            with open(corrupt_path(path), "ab") as kept:
                kept.write(rest if rest.endswith(b"\n") else rest + b"\n")
        f.truncate(damage)
