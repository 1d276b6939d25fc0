"""A batch run's directory: a manifest and one session file per problem and trajectory.

    RUN/run.json                        what was asked (the protocol, the problems) and each
                                        problem's state: pending, running, done or skipped (why)
    RUN/sessions/<problem>.t<j>.jsonl   trajectory j of a problem, in the format `replay` reads
    RUN/report/                         what `kevin-tui batch report` writes

The manifest is rewritten whole through a temporary file and a rename, so a kill leaves the old
one or the new one, never a mix; sessions are appended event by event (kevin_tui.session).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kevin_tui import __version__
from kevin_tui.errors import EXIT_USAGE, KevinError
from kevin_tui.problem import Problem

MANIFEST = "run.json"
SCHEMA = 1
STATES = ("pending", "running", "done", "skipped")


class RunDirectoryError(KevinError):
    exit_code = EXIT_USAGE


@dataclass
class ProblemEntry:
    key: str  # the problem's name in this run: its file's stem (with its folder when two share one)
    path: str
    sha256: str
    state: str = "pending"
    reason: str = ""


@dataclass
class Manifest:
    directory: Path
    protocol: dict[str, Any]  # trajectories, turns, model, sampling, budget, prompts, evaluation options
    problems: list[ProblemEntry]
    created: str = ""
    kevin_tui: str = __version__
    schema: int = SCHEMA
    notes: list[str] = field(default_factory=list)

    @property
    def sessions(self) -> Path:
        return self.directory / "sessions"

    def session_id(self, key: str, trajectory: int) -> str:
        return f"{key}.t{trajectory:02d}"

    def session_path(self, key: str, trajectory: int) -> Path:
        return self.sessions / f"{self.session_id(key, trajectory)}.jsonl"

    def entry(self, key: str) -> ProblemEntry:
        return next(p for p in self.problems if p.key == key)

    def mark(self, key: str, state: str, reason: str = "") -> None:
        assert state in STATES, state
        entry = self.entry(key)
        entry.state, entry.reason = state, reason
        self.save()

    def save(self) -> None:
        data = {k: v for k, v in asdict(self).items() if k != "directory"}
        temporary = self.directory / f".{MANIFEST}.tmp"
        temporary.write_text(json.dumps(data, indent=1, default=str) + "\n")
        os.replace(temporary, self.directory / MANIFEST)

    @classmethod
    def create(cls, directory: Path, protocol: dict[str, Any], problems: list[Path]) -> Manifest:
        """A new run; refuses a directory that already holds one (that is what --resume is for)."""
        if (directory / MANIFEST).exists():
            raise RunDirectoryError(
                f"{directory} already holds a batch run: continue it with --resume {directory}, or choose another --out"
            )
        if not problems:
            raise RunDirectoryError("batch needs at least one problem file")
        entries = [ProblemEntry(key, str(path.resolve()), source_sha256(path))
                   for key, path in zip(problem_keys(problems), problems, strict=True)]  # fmt: skip
        directory.mkdir(parents=True, exist_ok=True)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        manifest = cls(directory, protocol, entries, created)
        manifest.sessions.mkdir(exist_ok=True)
        manifest.save()
        return manifest

    @classmethod
    def load(cls, directory: Path) -> Manifest:
        path = directory / MANIFEST
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise RunDirectoryError(f"{directory}: not a batch run (no {MANIFEST})") from None
        except (OSError, ValueError) as exc:
            raise RunDirectoryError(f"{path}: cannot read it ({exc})") from None
        if data.get("schema", 0) > SCHEMA:
            newer = data["schema"]
            raise RunDirectoryError(f"{path}: written by a newer kevin-tui (schema {newer}); upgrade to read it")
        try:
            problems = [ProblemEntry(**p) for p in data["problems"]]
            return cls(directory, data["protocol"], problems, data.get("created", ""), data.get("kevin_tui", "?"),
                       data.get("schema", SCHEMA), data.get("notes", []))  # fmt: skip
        except (KeyError, TypeError) as exc:
            raise RunDirectoryError(f"{path}: malformed ({type(exc).__name__}: {exc})") from None


def problem_keys(paths: list[Path]) -> list[str]:
    """Each problem's name: its file's stem, with its folder's name before it where stems collide
    (then with a number after it if even that is not enough)."""
    stems = [p.stem for p in paths]
    keys = [f"{p.parent.name}-{p.stem}" if stems.count(p.stem) > 1 else p.stem for p in paths]
    seen: dict[str, int] = {}
    unique = []
    for key in keys:
        seen[key] = seen.get(key, 0) + 1
        unique.append(key if keys.count(key) == 1 else f"{key}-{seen[key]}")
    return unique


def source_sha256(path: Path | str) -> str:
    """The problem file's hash as sessions record it; whether it is a usable problem is found out
    when it is opened (an unusable one is skipped then, with why)."""
    try:
        return Problem(Path(path), Path(path).read_text()).sha256
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirectoryError(f"{path}: cannot read it ({exc})") from None
