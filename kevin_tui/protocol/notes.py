"""Notes kevin-tui words for the user to send the model as the next turn's note (the user's own are theirs)."""

from __future__ import annotations

from kevin_tui.evaluator.host.ncu import evidence_lines as ncu_lines
from kevin_tui.evaluator.host.speed_of_light import describe as describe_bound


def profile_note(evidence: dict, limit: int = 5) -> str:
    """A few lines on where the time goes, short enough to send to the model as a note (the TUI's `P`)."""
    profile = evidence.get("profile") or {}
    rows = profile.get("kernels") or profile.get("ops") or []
    parts = [f"{name} {ms:.3f} ms x{calls}" for name, calls, ms in rows[:limit]]
    text = "Profile of one forward call: " + ("; ".join(parts) if parts else "nothing measured") + "."
    if (coverage := evidence.get("coverage")) is not None:
        text += f" {coverage:.0%} of the time is in your own kernels."
    if sol := evidence.get("speed_of_light"):
        text += f" Speed of light: {describe_bound(sol)}."
    if (ncu := evidence.get("ncu")) and ncu.get("kernels"):
        text += " Nsight Compute, per kernel: " + " | ".join(ncu_lines(ncu)[:limit]) + "."
    return text
