"""Running the evidence that follows a correct verdict, after the verdict has gone out (see
kevin_tui/evaluator/evidence.py): the profile and other sizes in the candidate's own worker, kept
alive for them, then the Nsight Compute pass in a worker of its own.

The caller decides when a part may run: each part times or runs the candidate, so it must not run
beside another kernel's judgement (the driver runs them under its device gate). A part that the
candidate's process breaks is evidence that it broke, never a change to the verdict already given.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kevin_tui.evaluator.evidence import EvidencePart
from kevin_tui.evaluator.host.candidate_run import Decided, HostRun
from kevin_tui.evaluator.host.decisions import Finding, decide
from kevin_tui.evaluator.host.reference import ReferenceLost
from kevin_tui.evaluator.host.workers import WorkerGone, WorkerTimeout, kill_workers_under, spares_paused
from kevin_tui.evaluator.protocol import ProtocolViolation
from kevin_tui.evaluator.verdict import Verdict, Warning_

if TYPE_CHECKING:
    from kevin_tui.evaluator.host.evaluator import Evaluator

BROKEN = (Decided, WorkerGone, WorkerTimeout, ProtocolViolation, ReferenceLost)


class CandidateEvidence:
    """The `LaterEvidence` of one correct verdict of the local evaluator."""

    def __init__(self, evaluator: Evaluator, run: HostRun, parts: list[str], done: Callable[[bool], None]) -> None:
        self.evaluator, self.run = evaluator, run
        self._parts = list(parts)
        self._done = done  # the candidate's worker is finished with: kill it, start the spare (or not)
        self._cancelled = threading.Event()
        self._closed = False
        self.ncu_scratch = evaluator.fresh_scratch("ncu")

    @property
    def parts(self) -> list[str]:
        return list(self._parts)

    def next_part(self, quiet: bool = True) -> EvidencePart | None:
        """Run the next part (blocking); None when none is left or the rest was cancelled. `quiet`: no
        phases reported (the verdict panel shows the evidence; the phase line belongs to judging)."""
        if self._cancelled.is_set() or not self._parts:
            self.close()
            return None
        name = self._parts[0]
        found = decide(Finding.CORRECT, "")  # a holder for this part's evidence and warnings
        self.run.quiet = quiet
        self.run.enter(name)  # its own deadline, from now: the verdict may have gone out a while ago
        started = time.perf_counter()
        try:
            self._run(name, found)
        except BROKEN as exc:
            found.evidence[f"{name}_failed"] = str(exc)[:300]
            found.warnings.append(Warning_("evidence_failed", f"the {name} pass after the verdict failed: "
                                           f"{str(exc)[:200]}"))  # fmt: skip
        if self._cancelled.is_set():  # a part cut short says nothing (a killed worker fails every size)
            self.close()
            return None
        self._parts.pop(0)
        if not self._parts:
            self.close()
        return EvidencePart(name, found.evidence, found.warnings, round(time.perf_counter() - started, 3))

    def _run(self, name: str, found: Verdict) -> None:
        if name == "profile":
            with spares_paused():  # it times the candidate's ops
                self.run.profile(found)
        elif name == "shapes":
            self.run.check_shapes(found)
        elif name == "ncu":
            self._done(True)  # before the Nsight Compute pass, which runs the candidate again in a worker of its own
            self.evaluator.nsight(found, self.run.source, self.ncu_scratch, not self.run.quiet)

    def cancel(self) -> None:
        """From any thread: kill what runs now (the waiting thread gets WorkerGone and returns)."""
        self._cancelled.set()
        self.run.worker.kill()
        kill_workers_under(self.ncu_scratch)

    def close(self) -> None:
        """The worker is killed; the spare is started unless this was cancelled (the run may be ending)."""
        if not self._closed:
            self._closed = True
            self._done(not self._cancelled.is_set())
