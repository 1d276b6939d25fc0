"""Evaluate two candidates one after the other in ONE Evaluator (as `optimize` does) and print both
verdicts: `python3 tests/candidates/forge/two_in_a_row.py PROBLEM FIRST SECOND [--cache-dir D]`.

Used by run_all.sh for the attacks whose damage lands on the next candidate
(protocol_crash_reference.py, then an honest kernel)."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from kevin_tui.evaluator import Evaluator  # noqa: E402
from kevin_tui.evaluator import EvalOptions  # noqa: E402
from kevin_tui.problem import load_problem  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("problem")
parser.add_argument("candidates", nargs="+")
parser.add_argument("--cache-dir", default="/tmp/kevin-redteam-cache")
args = parser.parse_args()
options = EvalOptions(device="cpu", timing_trials=20, cache_dir=Path(args.cache_dir))
with Evaluator(load_problem(args.problem), options, prespawn=False) as evaluator:
    for path in args.candidates:
        verdict = evaluator.evaluate(Path(path).read_text())
        message = verdict.message.splitlines()[0][:200] if verdict.message else ""
        print(f"{Path(path).name} -> {verdict.status.value}: {message}")
