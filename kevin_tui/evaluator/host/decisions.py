"""Every status the host gives a candidate, in one table: what was found decides it, and which findings
outrank which.

The steps of a run (host/candidate_run.py), the evaluator's checks before it (host/evaluator.py) and the
passes that may overrule a reached verdict (--strict, --shapes strict, compute-sanitizer) name a `Finding`
and say what they saw; the status is this table's. Each verdict keeps the finding's name in
`details["finding"]`, so a report or a batch can tell "wrong output" from "the clock disagrees" without
reading the message.
"""

from __future__ import annotations

import enum
import re
from typing import Any

from kevin_tui.evaluator.protocol import CANDIDATE_FAILURES
from kevin_tui.evaluator.verdict import Status, Verdict


class Finding(enum.Enum):
    """What the host found, the status it gives, and whether a failed build found in the same run outranks
    it (what the host knows about builds outranks what happened after them; a candidate breaking the
    protocol, or the reference worker lost, is not explained by a build)."""

    gives: Status | None  # the status it gives (None: the worker's own report names it)
    yields_to_builds: bool

    def __new__(cls, name: str, gives: Status | None, yields_to_builds: bool) -> Finding:
        member = object.__new__(cls)
        member._value_ = name
        member.gives, member.yields_to_builds = gives, yields_to_builds
        return member

    # before a worker runs anything
    SYNTAX_ERROR = ("syntax_error", Status.COMPILE_ERROR, False)
    NO_MODEL_NEW = ("no_model_new", Status.FORMAT_ERROR, False)
    # the candidate's run
    REPORTED_BY_WORKER = ("reported_by_worker", None, True)  # the worker's own failure report: its status
    CRASHED = ("crashed", Status.RUNTIME_ERROR, True)
    ENVIRONMENT_CLAIMED = ("environment_claimed", Status.RUNTIME_ERROR, True)  # after import: the candidate's
    DIED = ("died", Status.RUNTIME_ERROR, True)
    TIMED_OUT = ("timed_out", Status.TIMEOUT, True)
    BUILD_TIMED_OUT = ("build_timed_out", Status.TIMEOUT, True)
    PROTOCOL_VIOLATION = ("protocol_violation", Status.REJECTED, False)
    REFERENCE_LOST = ("reference_lost", Status.RUNTIME_ERROR, False)
    BUILD_FAILED = ("build_failed", Status.COMPILE_ERROR, False)
    CANNOT_BUILD_HERE = ("cannot_build_here", Status.COMPILE_ERROR, False)  # CUDA asked for on a CPU evaluation
    BUILT_WITHOUT_DEVICE = ("built_without_device", Status.COMPILED, False)
    CACHE_CHANGED = ("cache_changed", Status.REJECTED, False)
    WRONG_OUTPUT = ("wrong_output", Status.INCORRECT, True)
    TIMED_OUTPUT_UNUSABLE = ("timed_output_unusable", Status.INCORRECT, True)
    CPU_KEPT_BUSY = ("cpu_kept_busy", Status.REJECTED, False)
    CLOCK_DISAGREES = ("clock_disagrees", Status.REJECTED, False)
    BELOW_OUTPUT_BOUND = ("below_output_bound", Status.REJECTED, False)
    CORRECT = ("correct", Status.CORRECT, False)
    # passes that overrule a reached verdict
    STRICT = ("strict", Status.REJECTED, False)
    OTHER_SIZES_STRICT = ("other_sizes_strict", Status.INCORRECT, False)
    SANITIZER = ("sanitizer", Status.INCORRECT, False)


def decide(finding: Finding, message: str, *, status: Status | None = None, **fields: Any) -> Verdict:
    """The verdict for `finding`; `status` only for the worker's own report, and only a failure."""
    if finding.gives is not None:
        status = finding.gives
    elif status is None or status.value not in CANDIDATE_FAILURES:
        raise ValueError(f"{finding.value} needs a failure status, not {status}")
    verdict = Verdict(status, message, **fields)
    verdict.details["finding"] = finding.value
    return verdict


def overrule(verdict: Verdict, finding: Finding, message: str, was: str | None = None) -> None:
    """A later pass's finding replaces a reached verdict's status (its speedups go with the old one)."""
    assert finding.gives is not None
    verdict.overrule(finding.gives, message, was)
    verdict.details["finding"] = finding.value


BY_NAME = {finding.value: finding for finding in Finding}


def finding_of(verdict: Verdict) -> Finding | None:
    return BY_NAME.get(verdict.details.get("finding", ""))


def settle(found: Verdict, builds: Verdict | None, cache_changed: Verdict | None) -> Verdict:
    """The run's verdict from what it found: a changed build cache outranks everything (the candidate's
    doing, whatever else happened), then a failed build outranks the findings that yield to it."""
    if cache_changed is not None:
        return cache_changed
    if builds is not None and (finding := finding_of(found)) is not None and finding.yields_to_builds:
        return builds
    return found


# What an honest CUDA kernel's failure on a machine without a GPU says: torch's "Expected x.is_cuda()", the CUDA
# runtime's "insufficient driver" / "no CUDA-capable device", "Torch not compiled with CUDA", "no NVIDIA driver".
NO_DEVICE_WORDS = re.compile(r"cuda|gpu|nvidia|driver", re.IGNORECASE)
EXPLAINED_WITHOUT_DEVICE = (Status.INCORRECT, Status.RUNTIME_ERROR, Status.TIMEOUT)


def without_device(found: Verdict, cuda_called: bool) -> Verdict:
    """A run with an nvcc build on a machine without a GPU, checked like any other: `compiled` ("built, not
    checkable without a GPU") only for a failure a missing GPU explains, one that names CUDA (a checked launch,
    a device check) or comes after the candidate called its nvcc-built code (at import, in __init__ or in forward:
    an unchecked launch leaves its output unwritten); one that never called it computed its answer on the CPU
    and keeps its own status."""
    finding = finding_of(found)
    if finding is None or not finding.yields_to_builds or found.status not in EXPLAINED_WITHOUT_DEVICE:
        return found
    if cuda_called:
        why = "it called its nvcc-built code, which cannot run here, and then"
    elif NO_DEVICE_WORDS.search(found.message):  # not the log or a traceback: torch's and our own names are there
        why = "forward failed as CUDA code without a device does:"
    else:
        return found
    message = f"built for real with nvcc; there is no CUDA device here and {why} {found.message}"
    return decide(Finding.BUILT_WITHOUT_DEVICE, message[:4000], details={**found.details, "without_device": True})
