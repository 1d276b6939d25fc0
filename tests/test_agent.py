"""One trajectory's Agent, in-process, its judge too (tests/fake_judge.py): each step records what it did;
resampling adds candidates to a turn; a later choice replaces the turn's earlier one; stop mid-stream keeps
what arrived."""

from __future__ import annotations

import asyncio
import json

import pytest

from kevin_tui.evaluator import EvalOptions
from kevin_tui.loop import Agent, Evaluating, LoopConfig
from kevin_tui.models.scripted import ScriptedBackend
from kevin_tui.protocol.prompt import PromptBuilder
from kevin_tui.protocol.templates import load_templates
from kevin_tui.session import Header, SessionWriter, load_session
from kevin_tui.session.events import EditEvent, ReplyEvent, RetryEvent
from tests.conftest import candidate
from tests.fake_judge import InProcessJudge


@pytest.fixture(scope="module")
def evaluator(relu_problem) -> InProcessJudge:
    """The Agent's judge, in process: what it records is this file's point (the real evaluator is judged by
    its own tests, and the loop's end-to-end run is test_loop's three turns)."""
    return InProcessJudge(relu_problem, EvalOptions(device="cpu", timing=False))


def make_agent(tmp_path, evaluator, replies, rate=0.0, events=None):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(replies))
    templates = load_templates()
    header = Header(id="t", created="now", problem={"path": "p", "sha256": "s", "source": ""}, model="m", backend="b")
    writer = SessionWriter(tmp_path / "s.jsonl", header)
    listener = (lambda event: events.append(event)) if events is not None else None
    builder = PromptBuilder(templates, evaluator.problem.source)
    return Agent(builder, ScriptedBackend(script, rate), evaluator, templates, writer, LoopConfig(), listener)


def answer(name: str) -> dict:
    return {"reasoning": "thinking", "answer": f"```python\n{candidate(name)}```\nDone."}


def test_an_edit_is_its_own_turn_marked_as_the_users(tmp_path, evaluator):
    agent = make_agent(tmp_path, evaluator, [answer("slightly_wrong.py")])

    async def run():
        turn = await agent.generate()
        await agent.evaluate(turn.candidates)
        agent.choose(turn, 0)
        edited = await agent.edit(candidate("relu_torch.py"), turn.candidates[0])
        await agent.evaluate(edited.candidates)
        agent.choose(edited, 0)
        return turn, edited

    turn, edited = asyncio.run(run())
    assert turn.candidates[0].status == "incorrect" and edited.candidates[0].status == "correct"
    assert [a.number for a in agent.attempts] == [1, 2] and agent.attempts[-1].edited_by_user
    prompt = agent.builder.build(agent.attempts).text
    assert "The user edited this code by hand before it was evaluated." in prompt
    (edit,) = load_session(tmp_path / "s.jsonl").of_type(EditEvent)
    assert edit.base == [0, 1, 0] and edit.turn == 2


def test_resampling_adds_candidates_and_the_new_choice_replaces_the_old(tmp_path, evaluator):
    agent = make_agent(tmp_path, evaluator, [answer("slightly_wrong.py"), answer("relu_torch.py")])

    async def run():
        turn = await agent.generate()
        await agent.evaluate(turn.candidates)
        agent.choose(turn, 0)
        new = await agent.resample(turn)
        await agent.evaluate(new)
        agent.choose(turn, new[0].index)
        return turn

    turn = asyncio.run(run())
    assert [c.index for c in turn.candidates] == [0, 1] and turn.chosen == 1
    assert [(a.number, a.feedback.status) for a in agent.attempts] == [(1, "correct")]
    session = load_session(tmp_path / "s.jsonl")
    assert [e.candidate for e in session.of_type(ReplyEvent)] == [0, 1]
    assert session.of_type(RetryEvent)[0].first_candidate == 1
    assert [r.ref.candidate for r in session.chosen()] == [1]


def test_stop_mid_stream_keeps_what_arrived(tmp_path, evaluator):
    events: list = []
    long = {"reasoning": "a long thought " * 400, "answer": "```python\n" + candidate("relu_torch.py") + "```\nok"}
    agent = make_agent(tmp_path, evaluator, [long], rate=500, events=events)

    async def run():
        task = asyncio.create_task(agent.generate())
        while not agent.live or len(agent.live[0].reasoning) < 200:
            await asyncio.sleep(0.01)
        agent.stop()
        turn = await task
        await agent.evaluate(turn.candidates)
        return turn

    turn = asyncio.run(run())
    assert turn.stopped and not agent.live
    candidate_ = turn.candidates[0]
    assert not candidate_.reply.complete and candidate_.reply.reasoning.startswith("a long thought")
    assert candidate_.status == "format_error" and "stopped" in candidate_.feedback.message
    saved = load_session(tmp_path / "s.jsonl").of_type(ReplyEvent)[0]
    assert saved.complete is False and saved.reasoning == candidate_.reply.reasoning
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("PromptEvent") < kinds.index("ReplyEvent") < kinds.index("Evaluating")
    assert kinds.index("Evaluating") < kinds.index("EvaluationEvent")
    assert any(isinstance(e, Evaluating) and e.ref == candidate_.ref for e in events)
