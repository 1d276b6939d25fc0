"""What the loop and the driver need from an evaluator.

The local evaluator (kevin_tui.evaluator) is one; batch mode's Ray evaluator
(kevin_tui.batch.remote), which judges on other machines, is another.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from kevin_tui.evaluator import EvalOptions, Verdict
from kevin_tui.evaluator.evidence import LaterEvidence
from kevin_tui.problem import Problem

ProgressFn = Callable[[str, str], None]


class Judge(Protocol):
    @property
    def last_log(self) -> Path | None:
        """The log the app shows under the build phase (the running builder's, else the latest candidate
        worker's)."""

    @property
    def device(self) -> str: ...

    @property
    def environment(self) -> dict[str, Any]:
        """Runs the reference first if it has not run; raises ProblemError if it cannot."""
        ...

    def evaluate(self, source: str) -> Verdict: ...

    def judge(self, source: str) -> tuple[Verdict, LaterEvidence | None]:
        """The verdict as soon as it is decided, and the evidence still to come for it (or None)."""
        ...

    def prebuild(self, sources: list[str]) -> None: ...

    def speed_of_light_line(self) -> str | None: ...

    def close(self) -> None: ...


JudgeFactory = Callable[[Problem, EvalOptions, ProgressFn | None], Judge]
