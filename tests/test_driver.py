"""The driver without any UI: scripted replies, candidates judged in process (tests/fake_judge.py: the
driver's decisions are under test here, the evaluator's in its own tests), real git repositories.

Includes the regression tests of two bugs the app had when it made these decisions itself:
accepting a candidate that was not its turn's chosen one committed the chosen one, and a retry
after an accept put the same attempt twice into the next prompt.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from kevin_tui.config import ProblemConfig, RunConfig
from kevin_tui.device_gate import DeviceGate
from kevin_tui.driver import Driver, Evidenced, Judged, Notice, Report, TurnEnded
from kevin_tui.evaluator import EvalOptions, Status
from kevin_tui.evaluator.host import sanitizer
from kevin_tui.models.backends import scripted_config
from kevin_tui.session import CandidateRef, load_session
from kevin_tui.session.events import AcceptEvent, EvaluationEvent, EvidenceEvent, PromptEvent, StopEvent
from tests.conftest import RELU, candidate
from tests.fake_judge import InProcessJudge, gated

SANITIZER_LOGS = Path(__file__).parent / "sanitizer_logs"


def reply(name: str, marker: str = "") -> dict:
    code = candidate(name) + (f"# {marker}\n" if marker else "")
    return {"reasoning": "thinking", "answer": f"```python\n{code}```\nSummary {marker}."}


@pytest.fixture
def git_env(monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def make_config(tmp_path, build_cache):
    def make(*replies: dict, repo: bool = True, timing: bool = False, rate: float = 0.0, **problem) -> RunConfig:
        script = tmp_path / "script.json"
        script.write_text(json.dumps(list(replies)))
        project = tmp_path / "proj"
        project.mkdir(exist_ok=True)
        if repo and not (project / ".git").exists():
            subprocess.run(["git", "init", "-q"], cwd=project, check=True)
        path = project / "relu.py"
        path.write_text(RELU.read_text())
        evaluation = EvalOptions(device="cpu", timing=timing, timing_trials=20, cache_dir=build_cache)
        return RunConfig(
            backend=scripted_config(script, rate),
            problem=ProblemConfig(problem=path, sessions_dir=tmp_path / "sessions", evaluation=evaluation, **problem),
        )

    return make


def drive(config: RunConfig, body: Callable[[Driver], Awaitable[None]]) -> tuple[list[Report], Path]:
    reports: list[Report] = []

    async def run() -> Path:
        async with Driver.open(config, reports.append, InProcessJudge) as driver:
            await body(driver)
            return driver.session_path

    return reports, asyncio.run(run())


async def idle(driver: Driver, timeout: float = 240) -> None:
    async with asyncio.timeout(timeout):
        while driver.busy():
            await asyncio.sleep(0.05)


def test_accept_commits_the_candidate_asked_for_not_its_turns_choice(make_config, git_env):
    config = make_config(reply("relu_torch.py", "candidate A"), reply("relu_torch.py", "candidate B"), candidates=2)
    kernel = config.problem.problem.parent / "relu_kernel.py"

    async def body(driver: Driver) -> None:
        await driver.advance()
        await driver.advance()  # turn 1's default choice (A, ranked first) entered the history
        assert driver.turn(0, 1).chosen == 0
        outcome = await driver.accept(CandidateRef(0, 1, 1))
        assert outcome.ok, outcome.message
        assert "turn 1.2" in outcome.message

    _, session = drive(config, body)
    assert "# candidate B" in kernel.read_text() and "candidate A" not in kernel.read_text()
    (accept,) = load_session(session).of_type(AcceptEvent)
    assert (accept.turn, accept.candidate) == (1, 1) and accept.commit


def test_a_retry_after_an_accept_puts_the_attempt_into_the_next_prompt_once(make_config, git_env):
    config = make_config(reply("relu_torch.py"), reply("slightly_wrong.py"), reply("relu_torch.py"))

    async def body(driver: Driver) -> None:
        await driver.advance()
        assert (await driver.accept(CandidateRef(0, 1, 0))).ok
        assert driver.retry(0) is None
        await idle(driver)
        assert [c.index for c in driver.turn(0, 1).candidates] == [0, 1]  # the retry joined the turn
        assert driver.continue_() is None
        await idle(driver)

    _, path = drive(config, body)
    session = load_session(path)
    prompt = next(e for e in session.of_type(PromptEvent) if e.turn == 2).text
    correct = "Your previous answer was correct but can be made faster"
    assert prompt.count(correct) == 1 and prompt.count("Your previous answer") == 1
    assert [a.number for a in session.history(0)] == [1]


def test_the_selected_candidate_continues_and_a_retry_resets_the_selection(make_config):
    config = make_config(reply("relu_torch.py"), reply("slightly_wrong.py"), candidates=2)

    async def body(driver: Driver) -> None:
        await driver.advance()
        assert [c.status for c in driver.turn(0, 1).ranked()] == ["correct", "incorrect"]
        driver.select(CandidateRef(0, 1, 1))  # the worse one, on purpose
        assert driver.continuing(0).index == 1
        driver.select(CandidateRef(0, 7, 0))  # not the latest turn: ignored
        assert driver.continuing(0).index == 1
        await driver.advance()

    _, path = drive(config, body)
    session = load_session(path)
    (attempt,) = session.history(0)
    assert attempt.feedback.status == "incorrect"
    assert session.header.prompts == "kevin"  # the header names the templates it was prompted with


def test_an_edit_follows_the_kernel_it_was_edited_from(make_config):
    config = make_config(reply("slightly_wrong.py"))

    async def body(driver: Driver) -> None:
        await driver.advance()
        fixed = driver.candidate(CandidateRef(0, 1, 0)).code.replace(" * 1.001", "")
        assert driver.edit(CandidateRef(0, 1, 0), fixed) is None
        assert driver.edit(CandidateRef(0, 1, 0), fixed) is not None  # busy: refused, with a reason
        await idle(driver)

    _, path = drive(config, body)
    history = load_session(path).history(0)
    assert [(a.number, a.feedback.status, a.edited_by_user) for a in history] == [
        (1, "incorrect", False), (2, "correct", True),
    ]  # fmt: skip


def test_trajectories_run_side_by_side_and_one_can_be_steered_alone(make_config):
    config = make_config(reply("slightly_wrong.py"), reply("relu_torch.py"), trajectories=2)

    async def body(driver: Driver) -> None:
        assert driver.continue_() is None  # every trajectory
        await idle(driver)
        assert driver.continue_("use float4", trajectory=1) is None
        assert driver.busy(1) and not driver.busy(0)
        await idle(driver)
        assert [len(driver.views(t)) for t in (0, 1)] == [1, 2]
        best = driver.best()
        assert best is not None and driver.candidate(best).status == "correct"

    _, path = drive(config, body)
    session = load_session(path)
    prompts = [(e.trajectory, e.turn) for e in session.of_type(PromptEvent)]
    assert sorted(prompts) == [(0, 1), (1, 1), (1, 2)]
    assert "use float4" in next(e for e in session.of_type(PromptEvent) if e.turn == 2).text


def test_a_slower_kernel_is_a_question_first_and_its_commit_never_says_faster(make_config, git_env):
    config = make_config(reply("relu_slow.py"), timing=True)
    project = config.problem.problem.parent

    async def body(driver: Driver) -> None:
        await driver.advance()
        ref = CandidateRef(0, 1, 0)
        assert driver.candidate(ref).speedup < 1
        asked = await driver.accept(ref)
        assert asked.ask == "slower" and "slower than the reference" in asked.message
        assert not (project / "relu_kernel.py").exists()
        assert (await driver.accept(ref, slower_ok=True)).ok

    drive(config, body)
    message = subprocess.run(["git", "log", "-1", "--format=%B"], cwd=project, capture_output=True, text=True).stdout
    assert message.startswith("feat(relu): Kevin kernel, 0.") and "faster" not in message


def test_outside_a_repository_accept_asks_to_create_one(make_config, git_env):
    config = make_config(reply("relu_torch.py"), repo=False)
    project = config.problem.problem.parent

    async def body(driver: Driver) -> None:
        await driver.advance()
        asked = await driver.accept(CandidateRef(0, 1, 0))
        assert asked.ask == "git_init" and "not in a git repository" in asked.message
        assert (await driver.accept(CandidateRef(0, 1, 0), git_init=True)).ok
        undone = await driver.undo()
        assert undone.ok and "removed relu_kernel.py" in undone.message

    drive(config, body)
    assert (project / ".git").exists() and not (project / "relu_kernel.py").exists()


def test_resume_restores_the_turns_and_continues_after_them(make_config):
    config = make_config(reply("slightly_wrong.py"), reply("relu_torch.py"))

    async def first(driver: Driver) -> None:
        assert driver.continue_() is None
        await idle(driver)  # turn 1 shown, not chosen yet: the app quits here

    drive(config, first)
    resumed = replace(config, problem=replace(config.problem, problem=None, resume="last"))

    async def second(driver: Driver) -> None:
        assert [v.status for v in driver.views(0)] == ["incorrect"]
        assert driver.continue_() is None
        await idle(driver)
        assert [v.number for v in driver.views(0)] == [1, 2]

    _, path = drive(resumed, second)
    session = load_session(path)
    assert [a.number for a in session.history(0)] == [1] and session.state == "stopped"


def test_failures_in_a_started_turn_are_reported_and_the_trajectory_is_idle_again(make_config, monkeypatch):
    config = make_config(reply("relu_torch.py"))

    async def boom(self, note=None):
        raise RuntimeError("evaluator exploded")

    monkeypatch.setattr("kevin_tui.loop.Agent.generate", boom)

    async def body(driver: Driver) -> None:
        driver.continue_()
        await idle(driver)

    reports, _ = drive(config, body)
    assert any(isinstance(r, Notice) and "evaluator exploded" in r.message for r in reports)
    assert TurnEnded(0, None, "failed") in reports


def test_stop_mid_stream_ends_the_turn_as_stopped(make_config):
    long = {"reasoning": "a very long chain of thought " * 300, "answer": "no code"}
    config = make_config(long, rate=300)

    async def body(driver: Driver) -> None:
        driver.continue_()
        async with asyncio.timeout(60):
            while (live := driver.live(0)) is None or len(live.reasoning) < 200:
                await asyncio.sleep(0.02)
        driver.stop(0)
        await idle(driver)

    reports, _ = drive(config, body)
    assert TurnEnded(0, 1, "stopped") in reports


def test_the_gate_never_times_a_kernel_while_the_model_generates():
    log: list[str] = []

    async def generation(gate: DeviceGate, name: str, seconds: float) -> None:
        async with gate.generating():
            log.append(f"+{name}")
            await asyncio.sleep(seconds)
            log.append(f"-{name}")

    async def evaluation(gate: DeviceGate) -> None:
        async with gate.evaluating():
            log.append("+eval")
            await asyncio.sleep(0.05)
            log.append("-eval")

    async def run(exclusive: bool) -> list[str]:
        log.clear()
        gate = DeviceGate(exclusive)
        first = asyncio.create_task(generation(gate, "g1", 0.1))
        await asyncio.sleep(0.01)
        judged = asyncio.create_task(evaluation(gate))
        await asyncio.sleep(0.01)
        late = asyncio.create_task(generation(gate, "g2", 0.01))  # held back: an evaluation is waiting
        await asyncio.gather(first, judged, late)
        return list(log)

    assert asyncio.run(run(True)) == ["+g1", "-g1", "+eval", "-eval", "+g2", "-g2"]
    assert asyncio.run(run(False))[:3] == ["+g1", "+eval", "+g2"]  # a remote model: only evaluations queue


@pytest.mark.parametrize("found", ["racecheck_hazard.log", "clean.log"])
def test_an_accept_on_cuda_runs_the_gate_first_and_a_finding_commits_nothing(make_config, git_env, monkeypatch,
                                                                              found):  # fmt: skip
    """The driver's accept path with the two things only a GPU has stood in for: the evaluator's device
    name, and compute-sanitizer's result (a fixture log in the tool's format) for the default tools."""
    config = make_config(reply("relu_torch.py", "kernel"))
    evaluation = replace(config.problem.evaluation, sanitize="accept")  # the command line's default
    config = replace(config, problem=replace(config.problem, evaluation=evaluation))
    kernel = config.problem.problem.parent / "relu_kernel.py"
    asked: list[tuple[str, ...]] = []

    def sanitize(self: InProcessJudge, source: str, tools: tuple[str, ...]) -> dict:
        asked.append(tuple(tools))
        return {"tools": {"racecheck": sanitizer.tool_result(SANITIZER_LOGS / found, "racecheck", None)}}

    async def body(driver: Driver) -> None:
        await driver.advance()
        monkeypatch.setattr(InProcessJudge, "device", property(lambda self: "cuda:0"))
        monkeypatch.setattr(InProcessJudge, "sanitize", sanitize, raising=False)  # the evaluator's, on a GPU
        outcome = await driver.accept(CandidateRef(0, 1, 0))
        if found == "clean.log":
            assert outcome.ok and "compute-sanitizer: clean under racecheck" in outcome.message, outcome.message
        else:
            assert not outcome.ok and outcome.message.startswith("not accepted: compute-sanitizer racecheck: Race")

    _, session = drive(config, body)
    assert asked == [sanitizer.TOOLS]
    (accept,) = load_session(session).of_type(AcceptEvent)
    assert kernel.exists() == (found == "clean.log") and bool(accept.commit) == (found == "clean.log")
    if found != "clean.log":
        assert "relu_race_kernel" in accept.error


# -- the verdict first, the evidence after (issue 21, item 5): the in-process judge's evidence waits for a
# gate the test opens (tests/fake_judge.py: gated), so each test decides when the evidence finishes


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


def test_a_resumed_turn_judged_at_the_end_has_its_evidence_before_the_end(make_config, git_env):
    """A run killed after a turn's reply and before its verdict, resumed with no turns left (batch --resume):
    `finish` judges that turn, and its evidence is recorded before the end event (it once came after, so
    the finished session read as interrupted)."""
    config = with_profile(make_config(reply("relu_torch.py")))

    async def first(driver: Driver) -> None:
        driver.continue_()
        await idle(driver)

    _, path = drive(config, first)
    judged = ('"type": "evaluation"', '"type": "evidence"', '"type": "stop"')
    path.write_text("".join(line for line in path.read_text().splitlines(True) if not line.startswith("{") or
                            not any(kind in line for kind in judged)))  # fmt: skip
    assert load_session(path).state == "interrupted" and not load_session(path).of_type(EvaluationEvent)
    resumed = replace(config, problem=replace(config.problem, problem=None, resume=str(path)))
    drive(resumed, lambda driver: driver.finish())
    session = load_session(path)
    assert session.of_type(EvaluationEvent) and session.of_type(EvidenceEvent)
    assert session.events[-1].type == "end" and session.state == "finished"


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
