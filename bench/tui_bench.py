"""TUI responsiveness: time to first frame, and CPU and frame delay while streaming 200 tokens/s.

    python3 bench/tui_bench.py

First frame: the app runs in a real terminal (tmux) and the screen is polled until its first
frame appears, beside the floor measured the same way: a bare Textual app that shows one label.
Streaming: the app runs headless (Pilot) with a scripted backend sending 200 chunks a second; a
timer probes event-loop lag every 20 ms (the worst is the worst frame delay) and the process's CPU
time is read, beside the same app sitting idle for as long.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FLOOR_APP = """
from textual.app import App
from textual.widgets import Label
class Floor(App):
    def compose(self):
        yield Label("Turns")
Floor().run()
"""
RUNS = 5


def first_frame(command: str, marker: str = "Turns") -> float:
    subprocess.run(["tmux", "kill-session", "-t", "kbench"], capture_output=True)
    started = time.perf_counter()
    subprocess.run(["tmux", "new-session", "-d", "-s", "kbench", "-x", "100", "-y", "30", command], check=True)
    try:
        while time.perf_counter() - started < 30:
            screen = subprocess.run(["tmux", "capture-pane", "-t", "kbench", "-p"], capture_output=True, text=True)
            if marker in screen.stdout:
                return time.perf_counter() - started
            time.sleep(0.005)
        raise RuntimeError(f"no first frame from {command!r}")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", "kbench"], capture_output=True)


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


async def streaming(rate: float, seconds: float, tmp: Path) -> tuple[float, float, int]:
    from kevin_tui.cli import build_parser
    from kevin_tui.tui.app import KevinApp

    chunks = int(rate * seconds) + 50
    script = tmp / "script.json"
    paragraph = "Kernel **tiling** idea, step by step. Then the next.\n\n"
    reasoning = paragraph * (chunks * 12 // len(paragraph) + 1)
    script.write_text(json.dumps([{"reasoning": reasoning, "answer": "no code"}]))
    problem = REPO.parent / "shared" / "kernelbench" / "level1" / "19_ReLU.py"
    args = build_parser().parse_args(["optimize", str(problem), "--device", "cpu", "--backend", "scripted",
                                      "--script", str(script), "--script-rate", str(rate), "--no-timing",
                                      "--sessions-dir", str(tmp / "sessions")])  # fmt: skip
    app = KevinApp(args=args)
    async with app.run_test(size=(100, 30)) as pilot:
        while not (app.busy and app.streaming is not None):
            await pilot.pause(0.05)
        before = len(app.streaming.reasoning)
        cpu, worst = await measure(app, pilot, seconds)
        received = len(app.streaming.reasoning) - before if app.streaming else 0
        app.agent.stop()
        await pilot.press("q")
    return cpu, worst, received // 12


async def idle(seconds: float) -> tuple[float, float]:
    """The baseline: the app showing a session, nothing streaming."""
    from kevin_tui.session import load_session
    from kevin_tui.tui.app import KevinApp

    app = KevinApp(session=load_session(REPO / "sessions" / "example-relu.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.5)
        result = await measure(app, pilot, seconds)
        await pilot.press("q")
    return result


async def measure(app, pilot, seconds: float) -> tuple[float, float]:
    """(CPU share of one core, worst event-loop lag) over `seconds`, probing every 20 ms."""
    lags: list[float] = []
    last = time.perf_counter()

    def probe() -> None:
        nonlocal last
        now = time.perf_counter()
        lags.append(now - last - 0.02)
        last = now

    timer = app.set_interval(0.02, probe)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await pilot.pause(seconds)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    timer.stop()
    return cpu / wall, max(lags) if lags else 0.0


def main() -> None:
    if not shutil.which("tmux"):
        raise SystemExit("needs tmux (apt-get install tmux)")
    example = REPO / "sessions" / "example-relu.jsonl"
    python = sys.executable
    floor = [first_frame(f"{python} -c '{FLOOR_APP}'") for _ in range(RUNS)]
    replay = [first_frame(f"{python} -m kevin_tui replay {example}") for _ in range(RUNS)]
    ours, bare = median(replay), median(floor)
    print(f"first frame, median of {RUNS}: kevin-tui replay {ours:.2f} s; bare Textual app {bare:.2f} s "
          f"(ratio {ours / bare:.2f}; goal < 1 s)")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        cpu, worst, chunks = asyncio.run(streaming(200, 8.0, Path(tmp)))
        idle_cpu, idle_worst = asyncio.run(idle(8.0))
    print(f"streaming at 200 tokens/s for 8 s ({chunks} chunks arrived): app CPU {cpu:.0%} of one core, "
          f"worst frame delay {worst * 1e3:.0f} ms; the same app idle: CPU {idle_cpu:.0%}, "
          f"worst delay {idle_worst * 1e3:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
