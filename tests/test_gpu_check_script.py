"""scripts/gpu-check.sh fits a lent GPU machine: its steps' budgets leave room for a rerun in the 15
minutes of device time, and what it writes under $OUT comes back (8 files at most). The rehearsal
(`scripts/gpu-check.sh --rehearse`, a CI step) runs the steps themselves."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "scripts" / "gpu-check.sh"
MAX_COMMAND_S = 360
MAX_FILES_BACK = 8


def steps() -> list[tuple[str, int, str]]:
    return [(m[1], int(m[2]), m[3]) for m in re.finditer(r"^\s+step (\S+) (\d+) (\S+) ", SCRIPT.read_text(), re.M)]


def test_the_budgets_add_up_to_one_call_with_room_for_a_rerun():
    found = steps()
    names = [name for name, _, _ in found]
    assert names[:4] == ["setup", "prebuild", "eval", "gpu-tests"], names  # what decides most, first
    assert sum(budget for _, budget, _ in found) <= MAX_COMMAND_S


def test_every_step_writes_a_file_that_comes_back():
    written = {file for _, _, file in steps()} | {"summary.txt", "eval-relu.json"}
    assert len(written) <= MAX_FILES_BACK, sorted(written)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", f) for f in written)  # names the device tool brings back


def test_the_script_parses_and_refuses_an_unknown_option():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    refused = subprocess.run(["bash", str(SCRIPT), "--bogus"], capture_output=True, text=True)
    assert refused.returncode == 2 and "usage: scripts/gpu-check.sh" in refused.stderr
