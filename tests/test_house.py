"""Seams of the house (issue 23): one owner per decision, checked without starting a worker."""

from __future__ import annotations

import re
from pathlib import Path

import kevin_tui
from kevin_tui.evaluator.verdict import Status, Verdict

PACKAGE = Path(kevin_tui.__file__).parent


def lines_matching(pattern: str, files: list[Path]) -> list[str]:
    return [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}" for path in files
            for number, line in enumerate(path.read_text().splitlines(), 1) if re.search(pattern, line)]  # fmt: skip


def test_a_later_finding_overrules_a_verdict_in_one_place():
    verdict = Verdict(Status.CORRECT, "correct, 2.00x", speedup=2.0, speedup_compile=1.5, speedup_interval=[1.9, 2.1])
    finding = "compute-sanitizer memcheck: Invalid __global__ write"
    verdict.overrule(Status.INCORRECT, finding, "unsanitized_status")
    assert (verdict.status, verdict.message) == (Status.INCORRECT, finding)
    assert verdict.speedup is verdict.speedup_compile is verdict.speedup_interval is None
    assert verdict.details["unsanitized_status"] == "correct"
    # nothing else on the host's side sets a reached verdict's status
    host = sorted((PACKAGE / "evaluator" / "host").glob("*.py"))
    assert lines_matching(r"\.status\s*(,[^=]*)?=(?!=)", host) == []


def test_the_host_side_is_handed_narrow_objects_and_names_its_classes_apart_from_the_workers():
    host, worker = PACKAGE / "evaluator" / "host", PACKAGE / "evaluator" / "worker"
    handed = [host / "candidate_run.py", host / "ncu.py", host / "sanitizer.py"]
    assert lines_matching(r"(?<![\w.])evaluator\.|\bEvaluator\b", handed) == []  # a RunContext, an OpenToolRun

    def classes(folder: Path) -> set[str]:
        return {name for path in folder.glob("*.py") for name in re.findall(r"^class (\w+)", path.read_text(), re.M)}

    assert classes(host) & classes(worker) == set()  # the trust boundary is visible in the names
