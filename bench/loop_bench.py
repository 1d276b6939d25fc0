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

from kevin_tui import kernelbench  # noqa: E402
from kevin_tui.evaluator.verdict import Status, Verdict  # noqa: E402
from kevin_tui.loop import Agent, LoopConfig  # noqa: E402
from kevin_tui.models.scripted import ScriptedBackend  # noqa: E402
from kevin_tui.protocol.feedback import Feedback  # noqa: E402
from kevin_tui.protocol.prompt import PromptBuilder  # noqa: E402
from kevin_tui.protocol.templates import load_templates  # noqa: E402
from kevin_tui.session import Header, SessionWriter, load_session  # noqa: E402
from kevin_tui.session.events import (  # noqa: E402
    AttemptEvent,
    EvaluationEvent,
    KernelEvent,
    PromptEvent,
    ReplyEvent,
)

PROBLEM = kernelbench.resolve_one("kernelbench:level2/1").read_text()
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
    writer = SessionWriter(directory / "overhead.jsonl", header("bench"))
    agent = Agent(PromptBuilder(templates, PROBLEM), ScriptedBackend(script), InstantEvaluator(), templates, writer,
                  LoopConfig(follow_up_summaries=False))  # fmt: skip

    async def run() -> float:
        started = time.perf_counter()
        for _ in range(turns):
            turn = await agent.generate()
            await agent.evaluate(turn.candidates)
            agent.choose(turn, 0)
        return (time.perf_counter() - started) / turns

    per_turn = asyncio.run(run())
    writer.close()
    return per_turn


def header(name: str, source: str = "") -> Header:
    return Header(id=name, created="now", problem={"path": "p.py", "sha256": "0", "source": source}, model="m",
                  backend="scripted")  # fmt: skip


def event_cost(directory: Path, n: int = 5000) -> tuple[float, float]:
    verdict = Verdict(Status.CORRECT, "x" * 200, speedup=1.5)
    writer = SessionWriter(directory / "events.jsonl", header("bench"))
    started = time.perf_counter()
    for _ in range(n):
        writer.write(EvaluationEvent(turn=3, candidate=0, verdict=verdict))
    ours = (time.perf_counter() - started) / n
    writer.close()
    payload = {"turn": 3, "candidate": 0, "verdict": verdict.to_dict()}
    with open(directory / "raw.jsonl", "w") as raw:
        started = time.perf_counter()
        for _ in range(n):
            raw.write(json.dumps({"type": "evaluation", **payload}) + "\n")
            raw.flush()
        baseline = (time.perf_counter() - started) / n
    return ours, baseline


def thousand_turns(directory: Path) -> tuple[float, float, float]:
    path = directory / "long.jsonl"
    writer = SessionWriter(path, header("long", PROBLEM))
    prompt_text = PROBLEM + KERNEL * 4
    verdict = Verdict(Status.CORRECT, "correct", speedup=1.5)
    feedback = Feedback("correct", "correct", "", 1.5)
    for turn in range(1, 1001):
        writer.write(PromptEvent(turn=turn, tokens=6000, counted_with="estimate", text=prompt_text))
        writer.write(ReplyEvent(turn=turn, reasoning=REASONING, answer=KERNEL, complete=True))
        writer.write(KernelEvent(turn=turn, code=KERNEL, summary="Fused."))
        writer.write(EvaluationEvent(turn=turn, verdict=verdict))
        writer.write(AttemptEvent(turn=turn, code=KERNEL, summary="Fused.", feedback=feedback))
    writer.close()
    started = time.perf_counter()
    session = load_session(path)
    records = session.candidates()  # the join every front end reads
    ours = time.perf_counter() - started
    assert session.turns == 1000 and len(records) == 1000
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
