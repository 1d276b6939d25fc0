"""The real Textual app driven by Pilot: scripted replies, real evaluation on the CPU, a real git repo."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest

from kevin_tui.cli import build_parser
from kevin_tui.session import load_session
from kevin_tui.tui.app import KevinApp
from tests.conftest import RELU, candidate

SIZE = (100, 32)


def reply(name: str | None, reasoning: str = "Thinking about coalesced loads. " * 10) -> dict:
    if name is None:
        return {"reasoning": reasoning, "answer": "No code this time."}
    return {"reasoning": reasoning, "answer": f"```python\n{candidate(name)}```\nSummary of turn."}


@pytest.fixture
def make_app(tmp_path, build_cache, monkeypatch):
    monkeypatch.setenv("KEVIN_TUI_CACHE_DIR", str(build_cache))
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)

    def make(*replies: dict, rate: float = 0.0, problem: Path = RELU) -> KevinApp:
        script = tmp_path / "script.json"
        script.write_text(json.dumps(list(replies)))
        args = build_parser().parse_args([
            "optimize", str(problem), "--device", "cpu", "--no-timing", "--backend", "scripted", "--script",
            str(script), "--script-rate", str(rate), "--sessions-dir", str(tmp_path / "sessions"), "--inline-editor",
        ])  # fmt: skip
        return KevinApp(args=args)

    return make


async def wait_for(pilot, condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.1)


def session_of(app: KevinApp):
    return load_session(app.run_state.writer.path)


def test_first_turn_starts_at_once_and_continue_runs_the_next(make_app):
    app = make_app(reply("slightly_wrong.py"), reply("relu_torch.py"))

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(app.views) == 1 and not app.busy)
            assert app.views[0].status == "incorrect"
            await pilot.press("c")
            await wait_for(pilot, lambda: len(app.views) == 2 and not app.busy)
            assert app.views[1].status == "correct"
            await wait_for(pilot, lambda: len(app.query("#turns Label")) == 2)  # rows mount asynchronously
            labels = [str(label.render()) for label in app.query("#turns Label")]
            assert labels[1].startswith("*✓")
            await pilot.press("q")
        return app

    app = asyncio.run(run())
    session = session_of(app)
    assert [e["turn"] for e in session.of_type("attempt")] == [1]  # turn 2 not chosen before quitting
    assert session.state == "stopped"


def test_note_reaches_the_next_prompt(make_app):
    app = make_app(reply("slightly_wrong.py"), reply("relu_torch.py"))

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(app.views) == 1 and not app.busy)
            await pilot.press("n")
            await pilot.pause()
            await pilot.press(*"use float4")
            await pilot.press("enter")
            await wait_for(pilot, lambda: len(app.views) == 2 and not app.busy)
            await pilot.press("q")

    asyncio.run(run())
    prompt = session_of(app).of_type("prompt")[-1]["text"]
    assert "A note from the user for this attempt: use float4" in prompt


def test_edit_with_the_inline_editor_is_evaluated_as_the_users_attempt(make_app):
    app = make_app(reply("slightly_wrong.py"))

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(app.views) == 1 and not app.busy)
            await pilot.press("e")
            await pilot.pause()
            editor = app.screen.query_one("#editor")
            editor.text = editor.text.replace(" * 1.001", "")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: len(app.views) == 2 and not app.busy)
            assert app.views[1].edited and app.views[1].status == "correct"
            await pilot.press("q")

    asyncio.run(run())
    session = session_of(app)
    assert session.of_type("edit") and session.of_type("attempt")[-1]["edited"] is True


def test_stop_mid_stream_keeps_what_arrived(make_app):
    long = {"reasoning": "a very long chain of thought " * 300, "answer": "```python\n" + candidate("relu_torch.py")}
    app = make_app(long, rate=300)

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.busy and app.streaming is not None and len(app.streaming.reasoning) > 200)
            await pilot.press("s")
            await wait_for(pilot, lambda: not app.busy and len(app.views) == 1)
            assert app.views[0].status == "format_error"
            await pilot.press("q")

    asyncio.run(run())
    saved = session_of(app).of_type("reply")[0]
    assert saved["complete"] is False and saved["reasoning"].startswith("a very long chain of thought")


def test_accept_commits_into_a_git_repo_and_undo_takes_it_back(make_app, tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    problem = project / "relu.py"
    problem.write_text(RELU.read_text())
    app = make_app(reply("relu_torch.py"), problem=problem)

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(app.views) == 1 and not app.busy)
            await pilot.press("a")
            await wait_for(pilot, lambda: (project / "relu_kernel.py").exists())
            await wait_for(pilot, lambda: bool(session_of(app).of_type("accept")))
            await pilot.press("u")
            await wait_for(pilot, lambda: not (project / "relu_kernel.py").exists())
            await pilot.press("q")

    asyncio.run(run())
    (accept,) = session_of(app).of_type("accept")
    assert accept["commit"] and accept["turn"] == 1


def test_a_broken_problem_is_shown_in_the_app_not_as_a_traceback(make_app):
    from tests.conftest import PROBLEMS

    app = make_app(reply("relu_torch.py"), problem=PROBLEMS / "reference_raises.py")

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            status = app.query_one("#status")
            await wait_for(pilot, lambda: "error:" in str(status.render()))
            assert "reference forward raised" in str(status.render())
            await pilot.press("q")

    asyncio.run(run())


def test_replay_is_read_only_and_walks_the_turns():
    example = Path(__file__).parents[1] / "sessions" / "example-relu.jsonl"
    app = KevinApp(session=load_session(example))

    async def run():
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert len(app.views) == 4
            await pilot.press("b")
            await pilot.pause()
            assert app.selected().status == "correct" and app.selected().speedup == max(
                v.speedup or 0 for v in app.views
            )
            assert app.check_action("continue_turn", ()) is False
            await pilot.press("d")
            await pilot.pause()
            assert app.query_one("TabbedContent").active == "tab-diff"
            assert "+++ this turn" in app.export_screenshot().replace("&#160;", " ")  # the diff header is on screen
            await pilot.press("q")

    asyncio.run(run())


def test_an_unexpected_worker_failure_is_shown_and_the_app_lives_on(make_app, monkeypatch):
    app = make_app(reply("relu_torch.py"))

    async def boom(self, *args, **kwargs):
        raise RuntimeError("evaluator exploded")

    monkeypatch.setattr("kevin_tui.loop.Agent.run_turn", boom)

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: any("evaluator exploded" in str(n.message) for n in app._notifications))
            assert app.is_running and not app.busy
            await pilot.press("q")

    asyncio.run(run())


def test_with_several_candidates_the_selected_one_continues(make_app, tmp_path):
    app = make_app(reply("relu_torch.py"), reply("slightly_wrong.py"), reply("relu_torch.py"))
    app.args.candidates = 2

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(app.views) == 2 and not app.busy)
            assert [v.status for v in app.views] == ["correct", "incorrect"]  # ranked, best first
            await wait_for(pilot, lambda: len(app.query("#turns Label")) == 2)
            labels = [str(label.render()) for label in app.query("#turns Label")]
            assert "1.1" in labels[0].split() and "1.2" in labels[1].split()  # turn.candidate
            await pilot.press("down")  # pick the worse one on purpose
            await pilot.pause()
            assert app.selected().status == "incorrect"
            await pilot.press("c")
            await wait_for(pilot, lambda: len(app.views) >= 3 and not app.busy)
            await pilot.press("q")

    asyncio.run(run())
    (attempt,) = session_of(app).of_type("attempt")
    assert attempt["turn"] == 1 and attempt["feedback"]["status"] == "incorrect"


def test_edit_in_editor_with_a_stand_in_editor(make_app, tmp_path, monkeypatch):
    editor = tmp_path / "fake-editor"
    editor.write_text("#!/bin/sh\nsed -i 's/ \\* 1.001//' \"$1\"\n")
    editor.chmod(0o755)
    app = make_app(reply("slightly_wrong.py"))
    app.args.inline_editor = False
    monkeypatch.setenv("EDITOR", str(editor))

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(app.views) == 1 and not app.busy)
            await pilot.press("e")
            await wait_for(pilot, lambda: len(app.views) == 2 and not app.busy)
            assert app.views[1].edited and app.views[1].status == "correct"
            await pilot.press("q")

    asyncio.run(run())
    assert "1.001" not in session_of(app).of_type("edit")[0]["code"]
