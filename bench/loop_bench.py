"""Loop overhead per turn, the cost of writing a session event, and loading a 1,000-turn session.

    python3 bench/loop_bench.py

Overhead per turn is everything the loop does except generating, building and running: building
the prompt, parsing the reply, recording events, updating the history. Generation is a scripted
backend that answers at once; evaluation is a stand-in that returns a verdict at once. Baselines,
measured in the same run: a bare json.dumps + write + flush per event, and json.loads per line.
Goals: overhead < 50 ms per turn, loading 1,000 turns < 1 s.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kevin_tui.evaluator.verdict import Status, Verdict  # noqa: E402
from kevin_tui.loop import Agent, LoopConfig  # noqa: E402
from kevin_tui.models.scripted import ScriptedBackend  # noqa: E402
from kevin_tui.protocol.prompt import PromptBuilder  # noqa: E402
from kevin_tui.protocol.templates import load_templates  # noqa: E402
from kevin_tui.session import SessionWriter, load_session  # noqa: E402

PROBLEM = (REPO.parent / "shared" / "kernelbench" / "level2" / "1_Conv2D_ReLU_BiasAdd.py").read_text()
KERNEL = (REPO / "tests" / "candidates" / "relu_cuda.py").read_text()
REASONING = " ".join(random.Random(0).choice(["tile", "warp", "coalesce", "fuse", "the", "load"]) for _ in range(8000))


class InstantEvaluator:
    device = "stand-in"

    def evaluate(self, source: str) -> Verdict:
        return Verdict(Status.CORRECT, "correct, 1.50x vs eager", speedup=1.5)


def overhead_per_turn(directory: Path, turns: int = 30) -> float:
    script = directory / "script.json"
    script.write_text(json.dumps([{"reasoning": REASONING, "answer": f"```python\n{KERNEL}```\nFused."}]))
    templates = load_templates()
    writer = SessionWriter(directory / "overhead.jsonl", {"id": "bench"})
    agent = Agent(PromptBuilder(templates, PROBLEM), ScriptedBackend(script), InstantEvaluator(), templates, writer,
                  LoopConfig(follow_up_summaries=False))  # fmt: skip

    async def run() -> float:
        started = time.perf_counter()
        for _ in range(turns):
            turn = await agent.run_turn()
            agent.choose(turn, 0)
        return (time.perf_counter() - started) / turns

    per_turn = asyncio.run(run())
    writer.close()
    return per_turn


def event_cost(directory: Path, n: int = 5000) -> tuple[float, float]:
    payload = {"turn": 3, "candidate": 0, "verdict": {"status": "correct", "speedup": 1.5, "message": "x" * 200}}
    writer = SessionWriter(directory / "events.jsonl", {"id": "bench"})
    started = time.perf_counter()
    for _ in range(n):
        writer.write("evaluation", **payload)
    ours = (time.perf_counter() - started) / n
    writer.close()
    with open(directory / "raw.jsonl", "w") as raw:
        started = time.perf_counter()
        for _ in range(n):
            raw.write(json.dumps({"type": "evaluation", **payload}) + "\n")
            raw.flush()
        baseline = (time.perf_counter() - started) / n
    return ours, baseline


def thousand_turns(directory: Path) -> tuple[float, float, float]:
    path = directory / "long.jsonl"
    writer = SessionWriter(path, {"id": "long", "problem": {"path": "p.py", "sha256": "0", "source": PROBLEM}})
    prompt_text = PROBLEM + KERNEL * 4
    for turn in range(1, 1001):
        writer.write("prompt", turn=turn, tokens=6000, text=prompt_text)
        writer.write("reply", turn=turn, candidate=0, reasoning=REASONING, answer=KERNEL, complete=True)
        writer.write("kernel", turn=turn, candidate=0, code=KERNEL, summary="Fused.")
        writer.write("evaluation", turn=turn, candidate=0, verdict={"status": "correct", "speedup": 1.5})
        writer.write("attempt", turn=turn, candidate=0, code=KERNEL, summary="Fused.", feedback={})
    writer.close()
    started = time.perf_counter()
    session = load_session(path)
    ours = time.perf_counter() - started
    assert session.turns == 1000
    started = time.perf_counter()
    with open(path, "rb") as f:
        [json.loads(line) for line in f]
    baseline = time.perf_counter() - started
    return ours, baseline, path.stat().st_size / 1e6


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        per_turn = overhead_per_turn(directory)
        print(f"loop overhead per turn: {per_turn * 1e3:.1f} ms (goal < 50 ms)")
        ours, baseline = event_cost(directory)
        print(f"writing one event: {ours * 1e6:.1f} us vs bare json+write+flush {baseline * 1e6:.1f} us "
              f"({ours / baseline:.2f}x)")  # fmt: skip
        load, raw, megabytes = thousand_turns(directory)
        print(f"loading a 1,000-turn session ({megabytes:.0f} MB): {load:.2f} s vs bare json.loads {raw:.2f} s "
              f"({load / raw:.2f}x; goal < 1 s)")  # fmt: skip


if __name__ == "__main__":
    main()
