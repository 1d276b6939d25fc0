"""The evaluation panel while a kernel is judged: its phase, the seconds it has taken, and why a
first build is slow (only when it is one)."""

from __future__ import annotations

import asyncio
import time

from textual.app import App, ComposeResult

from kevin_tui.config import ProblemConfig, RunConfig
from kevin_tui.driver import FIRST_BUILD_HINT, Driver, Phase
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
            panel.show_phase(Phase(None, "build", "", time.monotonic() - 12, FIRST_BUILD_HINT), None)
            await pilot.pause()
            return str(panel.render())

    text = asyncio.run(run())
    assert "build… 12 s" in text and "precompiling headers, about a minute" in text


def test_the_hint_is_given_only_before_the_first_precompiled_header(tmp_path):
    reports: list = []
    config = RunConfig(problem=ProblemConfig(evaluation=EvalOptions(cache_dir=tmp_path)))
    driver = Driver(config, reports.append)
    driver._on_progress("build", "")
    (tmp_path / "pch" / "key").mkdir(parents=True)
    (tmp_path / "pch" / "key" / "torch_extension_pch.h.gch").write_bytes(b"")
    driver._on_progress("build", "")
    driver._on_progress("check", "")
    assert [r.hint for r in reports] == [FIRST_BUILD_HINT, None, None]
