"""A batch run read back from its directory: each problem's trajectories as the kernels they judged.

Each turn of a trajectory counts with one kernel: the candidate that entered the history, or for a
turn cut short before that, its best evaluated candidate (kevin_tui.ranking). A turn whose kernel
was never judged does not count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kevin_tui.batch.manifest import Manifest
from kevin_tui.batch.metrics import Kernel, Trajectory
from kevin_tui.ranking import ranked
from kevin_tui.session import CandidateRecord, Session, SessionError, load_session


@dataclass(frozen=True)
class ProblemOutcome:
    key: str
    path: str
    state: str
    reason: str
    trajectories: tuple[Trajectory, ...]
    finished: int  # trajectories whose session ended


@dataclass(frozen=True)
class RunOutcome:
    manifest: Manifest
    problems: tuple[ProblemOutcome, ...]
    warnings: tuple[str, ...] = ()

    @property
    def directory(self) -> Path:
        return self.manifest.directory

    @property
    def name(self) -> str:
        return self.directory.resolve().name

    @property
    def trajectories(self) -> int:
        return int(self.manifest.protocol["trajectories"])

    @property
    def turns(self) -> int:
        return int(self.manifest.protocol["turns"])

    @property
    def model(self) -> str:
        return str(self.manifest.protocol.get("model", "?"))

    @property
    def judged(self) -> tuple[ProblemOutcome, ...]:
        """The problems the figures are about: all but those skipped before any kernel was judged."""
        return tuple(p for p in self.problems if p.state != "skipped" or any(t.kernels for t in p.trajectories))

    @property
    def compile_timed(self) -> bool:
        return any(k.speedup_compile is not None for p in self.problems for t in p.trajectories for k in t.kernels)


def turn_records(session: Session) -> list[CandidateRecord]:
    """The kernel each judged turn counts with, in turn order (one session holds one trajectory)."""
    by_turn: dict[int, list[CandidateRecord]] = {}
    for record in session.candidates():
        if record.evaluation is not None:
            by_turn.setdefault(record.ref.turn, []).append(record)
    chosen = []
    for turn in sorted(by_turn):
        records = by_turn[turn]
        picked = next((r for r in records if r.attempt is not None), None)
        chosen.append(picked or ranked(records, lambda r: r.score)[0])
    return chosen


def trajectory_of(session: Session) -> Trajectory:
    kernels = []
    for record in turn_records(session):
        verdict = record.verdict
        assert verdict is not None
        kernels.append(Kernel(record.ref.turn, verdict.status.value, verdict.speedup, verdict.speedup_compile))
    return Trajectory(tuple(kernels))


def load_run(directory: Path) -> RunOutcome:
    """Every problem of the run with the sessions written so far (a run still going, or killed, too)."""
    manifest = Manifest.load(directory)
    problems, warnings = [], []
    for entry in manifest.problems:
        trajectories, finished = [], 0
        for index in range(int(manifest.protocol["trajectories"])):
            path = manifest.session_path(entry.key, index)
            if not path.exists():
                continue
            try:
                session = load_session(path)
            except SessionError as exc:
                warnings.append(str(exc))
                continue
            trajectories.append(trajectory_of(session))
            finished += session.state == "finished"
        problems.append(ProblemOutcome(entry.key, entry.path, entry.state, entry.reason, tuple(trajectories), finished))
    return RunOutcome(manifest, tuple(problems), tuple(warnings))
