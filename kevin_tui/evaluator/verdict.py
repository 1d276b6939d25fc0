"""The verdict contract shared by the CLI, the agent loop and the TUI.

Everything here is plain data that round-trips through JSON, because verdicts
travel from the worker process over a pipe and are stored in session files.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class Status(enum.StrEnum):
    FORMAT_ERROR = "format_error"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    INCORRECT = "incorrect"
    REJECTED = "rejected"
    COMPILED = "compiled"
    CORRECT = "correct"


class EnvironmentProblem(Exception):
    """This machine cannot build or run the candidate (CPU-only torch, no nvcc, no sandbox when one is
    required): not the candidate's fault."""


EXIT_CODES = {Status.CORRECT: 0, Status.COMPILED: 3}
EXIT_OTHER = 1
EXIT_PROBLEM_UNUSABLE = 2
EXIT_CANNOT_EVALUATE_HERE = 4


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class Warning_:
    code: str
    message: str


@dataclass
class Timing:
    """Per-call times in milliseconds; median is what speedups use."""

    median_ms: float
    min_ms: float
    p10_ms: float
    p90_ms: float
    max_ms: float
    trials: int
    method: str

    @classmethod
    def from_samples(cls, samples_ms: list[float], method: str) -> Timing:
        ordered = sorted(samples_ms)
        n = len(ordered)

        def pct(q: float) -> float:
            return ordered[min(n - 1, round(q * (n - 1)))]

        return cls(pct(0.5), ordered[0], pct(0.1), pct(0.9), ordered[-1], n, method)


@dataclass
class Verdict:
    status: Status
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    speedup: float | None = None
    speedup_compile: float | None = None
    speedup_interval: list[float] | None = None  # [low, high] of the speedup vs eager, 95% bootstrap
    candidate_ms: float | None = None
    reference_ms: float | None = None
    reference_compile_ms: float | None = None
    timings: dict[str, Timing] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    warnings: list[Warning_] = field(default_factory=list)
    device: str = "cpu"
    phases_s: dict[str, float] = field(default_factory=dict)
    clock: str = ""  # which clock the speedup comes from
    evidence: dict[str, Any] = field(default_factory=dict)  # speed of light, coverage, shapes, profile
    sandbox: str = ""  # "bwrap", "unshare" or "off (why)"

    def overrule(self, status: Status, message: str, was: str | None = None) -> None:
        """The one place a reached verdict's status changes: a later finding (--strict, --shapes strict,
        compute-sanitizer) overrules it. Its speedups belonged to the status it had, which `was` (a
        details key) keeps."""
        if was is not None:
            self.details[was] = self.status.value
        self.status, self.message = status, message
        self.speedup = self.speedup_compile = self.speedup_interval = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, EXIT_OTHER)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return cls(
            status=Status(data["status"]),
            message=data["message"],
            details=data.get("details") or {},
            speedup=data.get("speedup"),
            speedup_compile=data.get("speedup_compile"),
            speedup_interval=data.get("speedup_interval"),
            candidate_ms=data.get("candidate_ms"),
            reference_ms=data.get("reference_ms"),
            reference_compile_ms=data.get("reference_compile_ms"),
            timings={k: Timing(**v) for k, v in (data.get("timings") or {}).items()},
            checks=[Check(**c) for c in data.get("checks") or []],
            warnings=[Warning_(**w) for w in data.get("warnings") or []],
            device=data.get("device", "cpu"),
            phases_s=data.get("phases_s") or {},
            clock=data.get("clock", ""),
            evidence=data.get("evidence") or {},
            sandbox=data.get("sandbox", ""),
        )
