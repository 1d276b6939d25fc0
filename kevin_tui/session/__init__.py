"""Sessions: one JSON-lines file each, a header then one typed event per thing that happened.

`events` defines what is recorded, `writer` appends it (one thread-safe writer per file), `reader`
loads it back, migrates older schemas and joins the events of each candidate.
"""

from kevin_tui.session.events import SCHEMA_VERSION, CandidateRef, Header
from kevin_tui.session.reader import CandidateRecord, Session, SessionError, find_session, load_session
from kevin_tui.session.writer import SessionWriter, new_session_id

__all__ = [
    "SCHEMA_VERSION", "CandidateRecord", "CandidateRef", "Header", "Session", "SessionError", "SessionWriter",
    "find_session", "load_session", "new_session_id",
]  # fmt: skip
