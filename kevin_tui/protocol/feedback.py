"""What the model is told about an evaluated attempt: the verdict, cut to what helps.

Compiler logs and tracebacks can run to thousands of lines; Kevin needs the first errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from kevin_tui.evaluator.compiler_output import format_error
from kevin_tui.evaluator.verdict import Verdict

MAX_DETAIL_LINES = 12
MAX_DETAIL_CHARS = 1500


@dataclass
class Feedback:
    status: str
    message: str
    detail: str = ""
    speedup: float | None = None


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
    return Feedback(verdict.status.value, verdict.message, trim(detail), verdict.speedup)


def format_error_feedback(reason: str) -> Feedback:
    return Feedback("format_error", reason)
