"""What the model is told about an evaluated attempt: the verdict, cut to what helps.

Compiler logs and tracebacks can run to thousands of lines; Kevin needs the first errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from kevin_tui.evaluator.compiler_output import format_error
from kevin_tui.evaluator.verdict import Verdict
from kevin_tui.ranking import speed_class

MAX_DETAIL_LINES = 12
MAX_DETAIL_CHARS = 1500


@dataclass
class Feedback:
    status: str
    message: str
    detail: str = ""
    speedup: float | None = None
    speedup_low: float | None = None  # 95% interval of the speedup; None in sessions from before it existed
    speedup_high: float | None = None

    @property
    def error(self) -> str:
        """What Kevin's prompt calls the error message: our one-line reason, then the details."""
        return f"{self.message}\n{self.detail}" if self.detail else self.message

    @property
    def speedup_text(self) -> str:
        """The speedup as the model is told it. An interval that contains 1.0 means the difference is
        noise, so it is not presented as a result; the figure is still given."""
        if self.speedup is None:
            return "unknown"
        figure = f"{self.speedup:.2f}"
        if self.speedup_low is None or self.speedup_high is None:
            return figure
        interval = f"95% interval {self.speedup_low:.2f}-{self.speedup_high:.2f}"
        if speed_class(self.speedup, (self.speedup_low, self.speedup_high)) == "same":
            return f"no measurable difference ({figure}, {interval})"
        return f"{figure} ({interval})"


def trim(text: str, lines: int = MAX_DETAIL_LINES, chars: int = MAX_DETAIL_CHARS) -> str:
    kept = text.strip().splitlines()[:lines]
    out = "\n".join(kept)
    return out[:chars] + (" ..." if len(out) > chars else "")


def feedback_from_verdict(verdict: Verdict) -> Feedback:
    details = verdict.details
    if errors := details.get("compiler_errors"):
        detail = "\n".join(format_error(e) for e in errors[:MAX_DETAIL_LINES])
    elif mismatch := details.get("mismatch"):
        figures = ("max_abs_error", "max_rel_error", "worst_index", "expected", "got")
        detail = ", ".join(f"{k}={mismatch[k]}" for k in figures if k in mismatch)
    elif tb := details.get("traceback"):
        detail = "\n".join(tb.strip().splitlines()[-MAX_DETAIL_LINES:])
    else:
        detail = ""
    low, high = verdict.speedup_interval or (None, None)
    return Feedback(verdict.status.value, verdict.message, trim(detail), verdict.speedup, low, high)


def format_error_feedback(reason: str) -> Feedback:
    return Feedback("format_error", reason)
