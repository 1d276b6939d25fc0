"""The evidence that follows a correct verdict: the profile, other sizes and the Nsight Compute digest.

The verdict (status, speedup, checks) is complete without them: the model's feedback, the ranking and
accept read only the verdict. So an evaluator hands back the verdict as soon as judging and timing are
done, and the evidence comes after it, one part at a time (`LaterEvidence`). The verdict's
`evidence["pending"]` names the parts still to come and `evidence["cancelled"]` the ones that never
finished (the user moved on, or the run ended); a session records both, so replay shows what was known.
Under `--shapes strict` other sizes decide the status, so they are part of judging, not evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kevin_tui.evaluator.verdict import Verdict, Warning_

PART_NAMES = {"profile": "profile", "shapes": "other sizes", "ncu": "ncu digest"}


@dataclass
class EvidencePart:
    """What one part found: evidence entries (merged into the verdict's), warnings, its seconds."""

    name: str
    evidence: dict[str, Any] = field(default_factory=dict)
    warnings: list[Warning_] = field(default_factory=list)
    seconds: float = 0.0


class LaterEvidence(Protocol):
    """The parts still to run for one verdict. `next_part` blocks (call it off the event loop);
    `cancel` may be called from any thread: the running part stops and no other starts."""

    @property
    def parts(self) -> list[str]: ...

    def next_part(self) -> EvidencePart | None: ...

    def cancel(self) -> None: ...


def pending(verdict: Verdict) -> list[str]:
    return list(verdict.evidence.get("pending") or [])


def expect(verdict: Verdict, parts: list[str]) -> None:
    """The verdict goes out with these parts to come."""
    if parts:
        verdict.evidence["pending"] = list(parts)


def merge(verdict: Verdict, part: EvidencePart) -> None:
    """A finished part joins its verdict."""
    verdict.evidence.update(part.evidence)
    verdict.warnings += [w for w in part.warnings if w not in verdict.warnings]
    verdict.phases_s[part.name] = part.seconds
    _set_pending(verdict, [p for p in pending(verdict) if p != part.name])


def cancel(verdict: Verdict, parts: list[str]) -> None:
    """These parts never finished; they are named as cancelled, no longer pending."""
    if not parts:
        return
    verdict.evidence["cancelled"] = list(dict.fromkeys([*verdict.evidence.get("cancelled", []), *parts]))
    _set_pending(verdict, [p for p in pending(verdict) if p not in parts])


def run_all(verdict: Verdict, later: LaterEvidence | None) -> Verdict:
    """Every part, in this thread, merged: the whole verdict for callers that wait for it (`eval`)."""
    while later is not None and (part := later.next_part()) is not None:
        merge(verdict, part)
    return verdict


def status_lines(evidence: dict[str, Any]) -> list[str]:
    """'profile: running…' for each part still to come, why a part failed, and one line for those that
    never finished."""
    lines = [f"  {PART_NAMES.get(p, p)}: running…" for p in evidence.get("pending") or []]
    lines += [f"  {name}: failed ({why})" for p, name in PART_NAMES.items() if (why := evidence.get(f"{p}_failed"))]
    if cancelled := evidence.get("cancelled"):
        names = ", ".join(PART_NAMES.get(p, p) for p in cancelled)
        lines.append(f"  {names}: cancelled (the turn moved on or the run ended before it finished)")
    return lines


def _set_pending(verdict: Verdict, parts: list[str]) -> None:
    if parts:
        verdict.evidence["pending"] = parts
    else:
        verdict.evidence.pop("pending", None)
