"""TUI responsiveness: time to first frame, and CPU and frame delay while streaming 200 tokens/s.

    python3 bench/tui_bench.py [--runs 5] [--seconds 6]

First frame: each app runs in a real terminal (tmux) and the screen is polled until its first
frame appears: `kevin-tui optimize` (scripted backend, CPU evaluation), `kevin-tui replay`, and the
floor, a bare Textual app that shows one label; the three are run in turn, `--runs` rounds.

Streaming: in-process (Pilot), a timer probes event-loop lag every 20 ms (the worst is the worst
frame delay) and the process's CPU time is read over `--seconds`, three rounds in turn, for: the
app streaming a scripted reply at 200 chunks a second (a chunk is 12 characters, more than a
token); a bare Textual app streaming the same reply the plainest way (a Static holding the last
3000 characters, updated 15 times a second); and the app sitting idle on a session.

Goals: first frame < 1 s; streaming < 10% of a core, no frame later than 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
RATE = 200
CHUNK = 12
ROUNDS = 3
EXAMPLE = REPO / "sessions" / "example-relu.jsonl"
PROBLEM = REPO / "kevin_tui" / "demo" / "relu.py"


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


def script(tmp: Path, seconds: float) -> Path:
    chunks = int(RATE * seconds * 1.5) + 100
    paragraph = "Kernel **tiling** idea, step by step. Then the next.\n\n"
    path = tmp / "script.json"
    path.write_text(json.dumps([{"reasoning": paragraph * (chunks * CHUNK // len(paragraph) + 1), "answer": "no"}]))
    return path


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


async def streaming(seconds: float, tmp: Path) -> tuple[float, float, int]:
    from kevin_tui.arguments import build_parser, run_config
    from kevin_tui.config import Settings
    from kevin_tui.tui.app import KevinApp

    args = build_parser().parse_args(["optimize", str(PROBLEM), "--device", "cpu", "--backend", "scripted",
                                      "--script", str(script(tmp, seconds)), "--script-rate", str(RATE),
                                      "--no-timing", "--sessions-dir", str(tmp / "sessions")])  # fmt: skip
    app = KevinApp(config=run_config(args, Settings()))
    async with app.run_test(size=(100, 30)) as pilot:
        while app.driver is None or app.driver.live(0) is None:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        before = len(app.driver.live(0).reasoning)
        cpu, worst = await measure(app, pilot, seconds)
        live = app.driver.live(0)
        received = len(live.reasoning) - before if live else 0
        app.driver.stop()
        await pilot.press("q")
    return cpu, worst, received // CHUNK


async def bare_streaming(seconds: float, tmp: Path) -> tuple[float, float]:
    """The floor: a bare Textual app showing the same stream the same way."""
    from rich.text import Text
    from textual.app import App, ComposeResult
    from textual.containers import VerticalScroll
    from textual.widgets import Static

    from kevin_tui.models.base import Reply, Sampling, StreamEnd
    from kevin_tui.models.scripted import ScriptedBackend

    class Bare(App):
        def compose(self) -> ComposeResult:
            with VerticalScroll():
                yield Static("", id="live")

        def on_mount(self) -> None:
            self.reply = Reply()
            self.set_interval(1 / 15, self.show)
            self.run_worker(self.consume())

        async def consume(self) -> None:
            async for item in ScriptedBackend(script(tmp, seconds), RATE).stream([{"content": ""}], Sampling()):
                if not isinstance(item, StreamEnd):
                    self.reply.add(item)

        def show(self) -> None:
            self.query_one("#live", Static).update(Text(self.reply.reasoning[-3000:], style="dim"))

    app = Bare()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.5)
        return await measure(app, pilot, seconds)


async def idle(seconds: float) -> tuple[float, float]:
    """The app showing a session, nothing streaming."""
    from kevin_tui.session import load_session
    from kevin_tui.tui.app import KevinApp

    app = KevinApp(session=load_session(EXAMPLE))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.5)
        result = await measure(app, pilot, seconds)
        await pilot.press("q")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=6.0)
    options = parser.parse_args()
    if not shutil.which("tmux"):
        raise SystemExit("needs tmux (apt-get install tmux)")
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = f"cd {tmp} && PYTHONPATH={REPO} KEVIN_TUI_CACHE_DIR={tmp / 'cache'}"
        commands = {
            "bare Textual app": f"{python} -c '{FLOOR_APP}'",
            "kevin-tui replay": f"{env} {python} -m kevin_tui replay {EXAMPLE}",
            "kevin-tui optimize": f"{env} {python} -m kevin_tui optimize {PROBLEM} --device cpu --backend scripted "
            f"--script {script(tmp, 1)} --no-timing",
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(options.runs):  # interleaved, so a noisy moment hits all three alike
            for name, command in commands.items():
                times[name].append(first_frame(command))
        floor = median(times["bare Textual app"])
        print(f"first frame, median of {options.runs} (goal < 1 s):")
        for name, values in times.items():
            print(f"  {name:<20} {median(values):.2f} s  (x{median(values) / floor:.2f} of the bare app; "
                  f"runs {', '.join(f'{v:.2f}' for v in values)})")  # fmt: skip
        results: dict[str, list[tuple[float, ...]]] = {"app streaming": [], "bare app streaming": [], "app idle": []}
        for _ in range(ROUNDS):
            results["app streaming"].append(asyncio.run(streaming(options.seconds, tmp)))
            results["bare app streaming"].append(asyncio.run(bare_streaming(options.seconds, tmp)))
            results["app idle"].append(asyncio.run(idle(options.seconds)))
    print(f"streaming {RATE} chunks/s of {CHUNK} characters for {options.seconds:.0f} s, {ROUNDS} rounds in turn, "
          f"median (goal < 10% of a core, worst delay < 50 ms):")  # fmt: skip
    for name, rounds in results.items():
        cpu, worst = median([r[0] for r in rounds]), median([r[1] for r in rounds])
        each = ", ".join(f"{r[0]:.0%}/{r[1] * 1e3:.0f} ms" for r in rounds)
        arrived = f"; {rounds[0][2]} chunks arrived in the first" if len(rounds[0]) > 2 else ""
        print(f"  {name:<20} CPU {cpu:.0%} of a core, worst delay {worst * 1e3:.0f} ms  (rounds: {each}{arrived})")


if __name__ == "__main__":
    os.environ.setdefault("TERM", "xterm-256color")
    main()
