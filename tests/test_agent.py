"""The Agent's intents, in-process: edit, retry, stop mid-stream, choose; events reach the listener."""

from __future__ import annotations

import asyncio
import json

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.loop import Agent, LoopConfig
from kevin_tui.models.scripted import ScriptedBackend
from kevin_tui.protocol.prompt import PromptBuilder
from kevin_tui.protocol.templates import load_templates
from kevin_tui.session import SessionWriter, load_session
from tests.conftest import candidate


@pytest.fixture(scope="module")
def evaluator(relu_problem, build_cache):
    with Evaluator(relu_problem, EvalOptions(device="cpu", timing=False, cache_dir=build_cache)) as ev:
        yield ev


def make_agent(tmp_path, evaluator, replies, rate=0.0, events=None):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(replies))
    templates = load_templates()
    writer = SessionWriter(tmp_path / "s.jsonl", {"id": "t"})
    listener = (lambda kind, data: events.append(kind)) if events is not None else None
    builder = PromptBuilder(templates, evaluator.problem.source)
    return Agent(builder, ScriptedBackend(script, rate), evaluator, templates, writer, LoopConfig(), listener)


def answer(name: str) -> dict:
    return {"reasoning": "thinking", "answer": f"```python\n{candidate(name)}```\nDone."}


def test_edit_is_evaluated_and_enters_the_history_marked(tmp_path, evaluator):
    agent = make_agent(tmp_path, evaluator, [answer("slightly_wrong.py")])

    async def run():
        turn = await agent.run_turn()
        agent.choose(turn, 0)
        edited = await agent.edit(candidate("relu_torch.py"))
        return turn, edited

    turn, edited = asyncio.run(run())
    assert turn.candidates[0].status == "incorrect" and edited.candidates[0].status == "correct"
    assert agent.attempts[-1].edited_by_user and agent.best is agent.attempts[-1]
    prompt = agent.builder.build(agent.attempts).text
    assert "### Attempt 2 (edited by the user before evaluation)" in prompt
    assert load_session(tmp_path / "s.jsonl").of_type("edit")


def test_retry_resamples_the_same_turn_without_touching_the_history(tmp_path, evaluator):
    agent = make_agent(tmp_path, evaluator, [answer("slightly_wrong.py"), answer("relu_torch.py")])

    async def run():
        first = await agent.run_turn()
        retried = await agent.run_turn(number=first.number)
        agent.choose(retried, 0)
        return first, retried

    first, retried = asyncio.run(run())
    assert first.number == retried.number == 1
    assert [a.number for a in agent.attempts] == [1] and agent.attempts[0].feedback.status == "correct"


def test_stop_mid_stream_keeps_what_arrived(tmp_path, evaluator):
    events: list[str] = []
    long = {"reasoning": "a long thought " * 400, "answer": "```python\n" + candidate("relu_torch.py") + "```\nok"}
    agent = make_agent(tmp_path, evaluator, [long], rate=500, events=events)

    async def run():
        task = asyncio.create_task(agent.run_turn())
        while events.count("delta") < 20:
            await asyncio.sleep(0.01)
        agent.stop()
        return await task

    turn = asyncio.run(run())
    assert turn.stopped
    candidate_ = turn.candidates[0]
    assert not candidate_.reply.complete and candidate_.reply.reasoning.startswith("a long thought")
    assert candidate_.status == "format_error" and "stopped" in candidate_.feedback.message
    saved = load_session(tmp_path / "s.jsonl").of_type("reply")[0]
    assert saved["complete"] is False and saved["reasoning"] == candidate_.reply.reasoning
    assert events.index("prompt") < events.index("delta") < events.index("reply") < events.index("evaluation")
