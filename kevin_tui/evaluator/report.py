"""A short, readable report of a verdict for the terminal."""

from __future__ import annotations

from kevin_tui.evaluator.compiler_output import format_error
from kevin_tui.evaluator.evidence import status_lines
from kevin_tui.evaluator.host.ncu import evidence_lines as ncu_lines
from kevin_tui.evaluator.host.sanitizer import summary as sanitizer_summary
from kevin_tui.evaluator.host.speed_of_light import describe as describe_bound
from kevin_tui.evaluator.verdict import Status, Verdict

MAX_DETAIL_LINES = 12


def _timing_line(label: str, verdict: Verdict, key: str) -> str | None:
    timing = verdict.timings.get(f"{key}_events") or verdict.timings.get(f"{key}_wall")
    if timing is None:
        return None
    return (
        f"  {label:<22} {timing.median_ms:9.4f} ms median  "
        f"[p10 {timing.p10_ms:.4f}, p90 {timing.p90_ms:.4f}]  n={timing.trials}  ({timing.method})"
    )


def evidence_lines(evidence: dict) -> list[str]:
    """Speed of light, the profile's top row, custom-kernel coverage, other sizes, the ncu digest, one line
    each; then the evidence still running, or cancelled (kevin_tui/evaluator/evidence.py)."""
    lines = []
    if sol := evidence.get("speed_of_light"):
        lines.append(f"  speed of light: {describe_bound(sol)}")
    if (profile := evidence.get("profile")) and (rows := profile.get("kernels") or profile.get("ops")):
        what = "kernels" if profile.get("kernels") else "ops"
        name, calls, ms = rows[0]
        lines.append(f"  profile: {len(rows)} {what}, the most time in {name} ({ms:.4f} ms x{calls})")
    if (coverage := evidence.get("coverage")) is not None:
        lines.append(f"  custom-kernel coverage: {coverage:.0%} of forward's compute time in the candidate's own code")
    if shapes := evidence.get("shapes"):
        tried = ", ".join(f"{label} {'ok' if result == 'correct' else 'FAILED'}" for label, result in shapes.items())
        lines.append(f"  other sizes: {tried}")
    if compiled := evidence.get("compiled"):
        breaks = "unknown" if compiled["graph_breaks"] is None else compiled["graph_breaks"]
        lines.append(f"  torch.compile: the same outputs on {compiled['trials']} trial(s); {breaks} graph break(s), "
                     f"{compiled['graph_breaks_source']}")  # fmt: skip
    if ncu := evidence.get("ncu"):
        lines += [f"  ncu: {line}" for line in ncu_lines(ncu)]
    if sanitized := evidence.get("sanitizer"):
        lines.append(f"  {sanitizer_summary(sanitized)}")
    return lines + status_lines(evidence)


def render(verdict: Verdict, candidate_name: str = "candidate") -> str:
    lines = [f"{verdict.status.value.upper()}: {verdict.message}", f"  device: {verdict.device}"]
    if verdict.sandbox:
        lines.append(f"  sandbox: {verdict.sandbox}")
    details = verdict.details
    for error in details.get("compiler_errors", [])[:MAX_DETAIL_LINES]:
        lines.append(f"  error {format_error(error)}")
    if mismatch := details.get("mismatch"):
        figures = {
            k: mismatch[k]
            for k in ("max_abs_error", "max_rel_error", "worst_index", "expected", "got")
            if k in mismatch
        }
        if figures:
            lines.append(
                "  " + ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())
            )
    if verdict.status in (Status.RUNTIME_ERROR, Status.TIMEOUT):
        tail = (details.get("traceback") or details.get("log") or "").strip().splitlines()
        lines += ["  | " + line for line in tail[-MAX_DETAIL_LINES:]]
    if verdict.status == Status.CORRECT:
        for label, key in (
            (candidate_name, "candidate"),
            ("reference (eager)", "reference"),
            ("reference (compile)", "reference_compile"),
        ):
            if line := _timing_line(label, verdict, key):
                lines.append(line)
        if verdict.speedup_compile is not None:
            lines.append(f"  speedup vs torch.compile: {verdict.speedup_compile:.2f}x")
        if verdict.clock:
            lines.append(f"  clock: {verdict.clock}")
    lines += evidence_lines(verdict.evidence)
    failed = [c for c in verdict.checks if not c.passed]
    passed = len(verdict.checks) - len(failed)
    if verdict.checks:
        lines.append(f"  checks: {passed} passed, {len(failed)} failed")
    lines += [f"  FAILED {c.name}: {c.detail}" for c in failed]
    lines += [f"  warning [{w.code}] {w.message}" for w in verdict.warnings]
    return "\n".join(lines)
