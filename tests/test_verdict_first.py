"""The verdict first, the evidence after (issue 21, item 5): the driver, the session, replay, headless
output and the app get a verdict as soon as it is judged, and its profile when that finishes. The
in-process judge's evidence waits for a gate the test opens (tests/fake_judge.py), so each test decides
when the evidence finishes; one test checks the same order with the real evaluator."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

from kevin_tui.config import RunConfig
from kevin_tui.driver import Driver, Evidenced, Judged, Report, TurnEnded
from kevin_tui.evaluator import Evaluator, Status
from kevin_tui.session import load_session
from kevin_tui.session.events import EvaluationEvent, EvidenceEvent, PromptEvent, StopEvent
from kevin_tui.tui.app import KevinApp
from kevin_tui.tui.evaluation_panel import EvaluationPanel
from tests.fake_judge import gated
from tests.test_driver import git_env, idle, make_config, reply  # noqa: F401 (fixtures)
from tests.test_tui import SIZE, make_app, screen_text, settled, wait_for  # noqa: F401 (fixture)


def with_profile(config: RunConfig) -> RunConfig:
    evaluation = replace(config.problem.evaluation, profile=True)
    return replace(config, problem=replace(config.problem, evaluation=evaluation))


async def until(condition, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def kinds(reports: list[Report]) -> list[str]:
    return [type(r).__name__ for r in reports if isinstance(r, Judged | TurnEnded | Evidenced)]


def test_the_verdict_and_the_turn_end_come_before_the_evidence(make_config, git_env):
    gate = threading.Event()
    config = with_profile(make_config(reply("relu_torch.py")))
    reports: list[Report] = []

    async def run():
        async with Driver.open(config, reports.append, gated(gate)) as driver:
            driver.continue_()
            await until(lambda: "TurnEnded" in kinds(reports))
            verdict = driver.candidate(driver.best()).verdict
            assert verdict.status is Status.CORRECT and verdict.evidence["pending"] == ["profile"]
            session = load_session(driver.session_path)
            assert session.of_type(EvaluationEvent) and not session.of_type(EvidenceEvent)
            gate.set()
            await until(lambda: "Evidenced" in kinds(reports))
            assert "pending" not in verdict.evidence and verdict.evidence["profile"]["ops"]
            await driver.finish()
            return driver.session_path

    path = asyncio.run(run())
    assert kinds(reports) == ["Judged", "TurnEnded", "Evidenced"]
    (event,) = load_session(path).of_type(EvidenceEvent)
    assert event.part == "profile" and event.evidence["profile"]["ops"]
    (record,) = load_session(path).candidates()
    assert record.verdict.evidence["profile"] == event.evidence["profile"] and "pending" not in record.verdict.evidence


def test_continuing_cancels_the_evidence_and_the_session_says_so(make_config, git_env):
    gate = threading.Event()
    config = with_profile(make_config(reply("relu_torch.py", "one"), reply("relu_torch.py", "two")))

    async def run():
        async with Driver.open(config, lambda r: None, gated(gate)) as driver:
            driver.continue_()
            await until(lambda: bool(driver.views(0)) and not driver.busy())
            assert driver.continue_() is None  # the next turn does not wait for the evidence
            await idle(driver)
            gate.set()  # too late for turn 1: it was cancelled; turn 2's finishes at the end
            await driver.finish()
            return driver.session_path

    session = load_session(asyncio.run(run()))
    cancelled = [e for e in session.of_type(EvidenceEvent) if e.cancelled]
    assert [(e.turn, e.cancelled) for e in cancelled] == [(1, ["profile"])]
    assert session.events.index(cancelled[0]) < session.events.index(session.of_type(PromptEvent)[1])
    first, second = session.candidates()
    assert first.verdict.evidence["cancelled"] == ["profile"] and "profile" not in first.verdict.evidence
    assert second.verdict.evidence["profile"]


def test_quitting_during_the_evidence_records_it_cancelled_and_replay_shows_it(make_config, git_env, tmp_path):
    gate = threading.Event()
    config = with_profile(make_config(reply("relu_torch.py")))

    async def run():
        async with Driver.open(config, lambda r: None, gated(gate)) as driver:
            driver.continue_()
            await until(lambda: bool(driver.views(0)) and not driver.busy())
            return driver.session_path  # leaving the driver is quitting, the evidence still waiting

    path = asyncio.run(run())
    session = load_session(path)
    (event,) = session.of_type(EvidenceEvent)
    assert event.cancelled == ["profile"] and session.events.index(event) < session.events.index(
        session.of_type(StopEvent)[0]
    )
    killed = tmp_path / "killed.jsonl"  # a run killed mid-evidence never wrote the cancellation
    killed.write_text("".join(line for line in path.read_text().splitlines(True) if '"type": "evidence"' not in line))
    (record,) = load_session(killed).candidates()
    assert record.verdict.evidence["cancelled"] == ["profile"] and "pending" not in record.verdict.evidence


def test_headless_turns_let_the_evidence_finish_before_the_next_build(make_config, git_env):
    config = with_profile(make_config(reply("relu_torch.py", "one"), reply("relu_torch.py", "two")))

    async def run():
        async with Driver.open(config, lambda r: None, gated(threading.Event())) as driver:
            await driver.advance()
            judge = driver.run.evaluator
            threading.Timer(0.3, judge.evidence_gate.set).start()
            await driver.advance()  # its build waits for turn 1's evidence at the gate; nothing is cancelled
            await driver.finish()
            return driver.session_path

    session = load_session(asyncio.run(run()))
    order = [(type(e).__name__, e.turn) for e in session.events if isinstance(e, EvaluationEvent | EvidenceEvent)]
    assert order == [("EvaluationEvent", 1), ("EvidenceEvent", 1), ("EvaluationEvent", 2), ("EvidenceEvent", 2)]
    assert not any(e.cancelled for e in session.of_type(EvidenceEvent))


def test_the_app_shows_profile_running_then_the_profile(make_app):
    gate = threading.Event()
    app = make_app(reply("relu_torch.py"), judge=gated(gate))

    def panel() -> str:
        return app.query_one(EvaluationPanel).text()

    async def run():
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: settled(app, 1) and "profile: running…" in panel())
            assert "CORRECT" in panel()
            await pilot.press("p")
            await wait_for(pilot, lambda: "Profile: running…" in screen_text(app))
            gate.set()
            await wait_for(pilot, lambda: "profile: running…" not in panel())
            assert "profile: " in panel() and "the most time in aten::" in panel()
            await wait_for(pilot, lambda: "sends a digest of this profile" in screen_text(app))
            await pilot.press("q")

    asyncio.run(run())


def test_with_the_real_evaluator_the_verdict_event_precedes_the_profile_event(make_config, git_env):
    config = with_profile(make_config(reply("relu_torch.py")))

    async def run():
        async with Driver.open(config, lambda r: None, Evaluator) as driver:
            await driver.advance()
            await driver.finish()
            return driver.session_path

    session = load_session(asyncio.run(run()))
    (evaluation,) = session.of_type(EvaluationEvent)
    (evidence,) = session.of_type(EvidenceEvent)
    assert evaluation.verdict.status is Status.CORRECT and evaluation.verdict.evidence["pending"] == ["profile"]
    assert "profile" not in evaluation.verdict.evidence
    assert session.events.index(evaluation) < session.events.index(evidence)
    assert evidence.part == "profile" and evidence.evidence["profile"]["ops"]
