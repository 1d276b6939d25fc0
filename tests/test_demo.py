"""`kevin-tui demo` as a newcomer sees it, driven by Pilot: the shipped problem in a new git
repository, the shipped replies, real g++ builds on the CPU; continue until a kernel is correct and
timed, then accept it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from kevin_tui.demo import prepare_demo
from kevin_tui.session import load_session
from kevin_tui.session.events import AcceptEvent
from kevin_tui.tui.app import KevinApp
from kevin_tui.tui.screens import ConfirmScreen
from tests.test_tui import SIZE, settled, wait_for


def test_the_demo_builds_checks_times_continues_and_accepts(tmp_path, build_cache, monkeypatch):
    monkeypatch.setenv("KEVIN_TUI_CACHE_DIR", str(build_cache))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    config, directory = prepare_demo(tmp_path / "demo", rate=0)
    assert (directory / ".git").exists() and (directory / "relu.py").exists()
    app = KevinApp(config=config, title="demo")

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: settled(app, 1), timeout=300)
            assert app.views()[0].status == "compile_error"
            await pilot.press("c")
            await wait_for(pilot, lambda: settled(app, 2), timeout=300)
            assert app.views()[1].status == "incorrect"  # the in-place cheat is caught
            await pilot.press("c")
            await wait_for(pilot, lambda: settled(app, 3), timeout=300)
            correct = app.views()[2]
            assert correct.status == "correct" and correct.speedup is not None  # checked and timed
            await pilot.press("a")
            await wait_for(
                pilot, lambda: isinstance(app.screen, ConfirmScreen) or (directory / "relu_kernel.py").exists()
            )
            if isinstance(app.screen, ConfirmScreen):  # slower than eager PyTorch here: asked first
                await pilot.press("y")
            await wait_for(pilot, lambda: (directory / "relu_kernel.py").exists())
            await pilot.press("q")

    asyncio.run(run())
    (accept,) = load_session(app.driver.session_path).of_type(AcceptEvent)
    log = subprocess.run(["git", "log", "--format=%H %s"], cwd=directory, capture_output=True, text=True).stdout
    assert accept.turn == 3 and log.startswith(accept.commit) and "Kevin kernel" in log


def test_the_demo_command_is_listed():
    result = subprocess.run([sys.executable, "-m", "kevin_tui", "--help"], capture_output=True, text=True,
                            cwd=Path(__file__).parents[1])  # fmt: skip
    assert result.returncode == 0 and "demo" in result.stdout and "offline" in result.stdout
