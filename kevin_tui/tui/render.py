"""Rich renderables for kernels, diffs and verdicts (Pygments does the highlighting)."""

from __future__ import annotations

import ast
import difflib

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from kevin_tui.evaluator.compiler_output import PARSE_ERRORS, printable
from kevin_tui.evaluator.report import evidence_lines
from kevin_tui.evaluator.report import render as render_report
from kevin_tui.evaluator.verdict import Verdict

THEME = "ansi_dark"


def cuda_sources(code: str) -> list[tuple[int, str]]:
    """(line, text) of the string constants that hold C++/CUDA code, to highlight them as such."""
    try:
        tree = ast.parse(code)
    except PARSE_ERRORS:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.count("\n") >= 2:
            text = node.value
            if "__global__" in text or "torch::" in text or "#include" in text:
                found.append((node.lineno, text))
    return sorted(found)


def kernel_renderable(code: str | None, theme: str = THEME) -> RenderableType:
    if not code:
        return Text("No kernel in this reply.", style="italic")
    parts: list[RenderableType] = [Syntax(code, "python", line_numbers=True, theme=theme, word_wrap=False)]
    for line, text in cuda_sources(code):
        parts.append(Text(f"\nC++/CUDA source starting at line {line}:", style="bold"))
        parts.append(Syntax(text.strip("\n"), "cuda", line_numbers=True, start_line=line + 1, theme=theme))
    return Group(*parts)


def diff_renderable(old: str | None, new: str | None, label: str, theme: str = THEME) -> RenderableType:
    if not old or not new:
        return Text("Nothing to compare with yet.", style="italic")
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), label, "this turn"))
    return Syntax(diff or "(identical)", "diff", theme=theme)


def verdict_renderable(verdict: Verdict | None) -> RenderableType:
    if verdict is None:
        return Text("Not evaluated yet.", style="italic")
    return Text(printable(render_report(verdict)))  # compiler messages in it are the candidate's text


def profile_renderable(verdict: Verdict | None) -> RenderableType:
    """Where one forward call's time goes (kernels on CUDA, PyTorch ops and the candidate's own
    functions on the CPU), with the speed-of-light standing and coverage above the table."""
    evidence = verdict.evidence if verdict is not None else {}
    profile = evidence.get("profile")
    if "profile" in evidence.get("pending", []):
        return Text("Profile: running… (it follows the verdict)", style="italic")
    if not profile:
        return Text(f"No profile: {_no_profile(evidence)}.", style="italic")
    head = Text("\n".join(line.strip() for line in evidence_lines(evidence)) or "")
    rows = profile.get("kernels") or profile.get("ops") or []
    table = Table("kernel" if profile.get("kernels") else "op", "calls", "ms", "share", box=None, pad_edge=False)
    total = sum(ms for _, _, ms in rows) or 1.0
    for name, calls, ms in rows:
        mine = name.startswith("kevin_ext::")
        table.add_row(Text(name, style="bold" if mine else ""), str(calls), f"{ms:.4f}", f"{ms / total:.0%}")
    hint = Text("\nP sends a digest of this profile to Kevin as the next turn's note.", style="dim")
    return Group(head, Text(""), table, hint)


def _no_profile(evidence: dict) -> str:
    if "profile" in evidence.get("cancelled", []):
        return "it was cancelled before it finished"
    if failed := evidence.get("profile_failed"):
        return f"it failed ({failed})"
    return "it is taken for correct kernels"
