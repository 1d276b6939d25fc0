"""The evaluation panel while a kernel is judged: its phase, the seconds it has taken, and why a
first build is slow (only when it is one)."""

from __future__ import annotations

import asyncio
import time

from textual.app import App, ComposeResult

from kevin_tui.config import ProblemConfig, RunConfig
from kevin_tui.driver import FIRST_BUILD_HINT, NEW_FLAGS_HINT, Driver, Phase
from kevin_tui.evaluator import EvalOptions
from kevin_tui.tui.evaluation_panel import EvaluationPanel


class PanelApp(App):
    def compose(self) -> ComposeResult:
        yield EvaluationPanel()


def test_a_long_build_shows_its_phase_seconds_and_why():
    app = PanelApp()

    async def run() -> str:
        async with app.run_test() as pilot:
            panel = app.query_one(EvaluationPanel)
            panel.hints = lambda: FIRST_BUILD_HINT
            panel.show_phase(Phase(None, "build", "", time.monotonic() - 12))
            await pilot.pause()
            return panel.text()

    text = asyncio.run(run())
    assert "build… 12 s" in text and "precompiling headers, about a minute" in text


def test_the_hint_says_when_headers_are_being_precompiled(tmp_path):
    """Read from the build cache's precompiled-header store: none yet (the first build makes one),
    one being written (new compiler flags), or nothing to explain."""
    driver = Driver(RunConfig(problem=ProblemConfig(evaluation=EvalOptions(cache_dir=tmp_path))), lambda r: None)
    store = tmp_path / "pch"
    assert driver.build_hint() == FIRST_BUILD_HINT
    (store / "a").mkdir(parents=True)
    (store / "a" / "torch_extension_pch.h.gch").write_bytes(b"")
    assert driver.build_hint() is None
    (tmp_path / "staging" / "b").mkdir(parents=True)
    (tmp_path / "staging" / "b" / "torch_extension_pch.h.gch").write_bytes(b"")
    assert driver.build_hint() == NEW_FLAGS_HINT


def test_the_build_log_is_shown_as_plain_printable_text_read_boundedly(tmp_path):
    """The builder's log holds the compiler's output on the candidate's sources: its tail is shown under
    the build phase with its seconds, escapes dropped and markup left as text, however large the log."""
    log = tmp_path / "builder.log"
    log.write_text("x" * 5_000_000 + "\n[  2.1 s] compiling and linking\n"
                   "[  3.4 s] | main.cpp:3:2: warning: \x1b[2J\x1b]0;owned\x07[bold red]boom[/bold red]\n")  # fmt: skip
    app = PanelApp()

    async def run() -> str:
        async with app.run_test(size=(120, 24)) as pilot:
            panel = app.query_one(EvaluationPanel)
            panel.build_log = lambda: log
            panel.show_phase(Phase(None, "build", "", time.monotonic() - 4))
            await pilot.pause()
            return panel.text()

    text = asyncio.run(run())
    assert "[  3.4 s] | main.cpp:3:2: warning: [2J]0;owned[bold red]boom[/bold red]" in text
    assert "\x1b" not in text and "\x07" not in text and "xxxxxxxxxx" * 40 not in text
