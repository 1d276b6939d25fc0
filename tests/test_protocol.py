"""Prompts turn by turn (golden files), the budget, reply parsing, and reasoning never resent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kevin_tui.evaluator.verdict import Status, Verdict
from kevin_tui.protocol.feedback import Feedback, feedback_from_verdict
from kevin_tui.protocol.parse import excerpt_summary, parse_reply
from kevin_tui.protocol.prompt import Attempt, PromptBuilder, estimate_tokens
from kevin_tui.protocol.summary import make_attempt
from kevin_tui.protocol.templates import load_templates
from tests.conftest import RELU

GOLDEN = Path(__file__).parent / "golden"
KERNEL = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.relu(x)\n"
FEEDBACKS = [
    Feedback(
        "compile_error",
        'the build failed: identifier "bias" is undefined',
        'cuda.cu:10 (candidate line 11): identifier "bias" is undefined',
    ),
    Feedback(
        "incorrect",
        "wrong output in trial 1 (before the reference): 12 of 262144 values outside tolerance",
        "max_abs_error=0.5, max_rel_error=1.0, worst_index=[3, 7]",
    ),
    Feedback("correct", "correct, 1.80x vs eager", "", 1.8),
    Feedback("format_error", "the reply has no code block"),
]


def history(n: int) -> list[Attempt]:
    return [
        Attempt(
            i + 1,
            None if FEEDBACKS[i % 4].status == "format_error" else KERNEL.replace("relu", f"relu_v{i + 1}"),
            f"Attempt {i + 1} used a grid-stride loop.",
            FEEDBACKS[i % 4],
        )
        for i in range(n)
    ]


def builder(budget: int = 8192) -> PromptBuilder:
    return PromptBuilder(load_templates(), RELU.read_text(), budget=budget)


@pytest.mark.parametrize("turn", [1, 2, 3, 5])
def test_golden_prompts(turn):
    attempts = history(turn - 1)
    if turn == 3:
        attempts[-1].edited_by_user = True
    note = "Try vectorized float4 loads." if turn == 5 else None
    text = builder().build(attempts, note).text
    golden = GOLDEN / f"relu_turn{turn}.txt"
    if os.environ.get("KEVIN_TUI_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), f"prompt changed; rerun with KEVIN_TUI_UPDATE_GOLDEN=1 if intended ({golden})"


def test_first_turn_has_the_example_and_later_turns_do_not():
    first = builder().build([]).text
    later = builder().build(history(1)).text
    assert "add_kernel" in first and "add_kernel" not in later
    assert "class Model(nn.Module)" in first and "Restart your reasoning" in later
    assert "Restart your reasoning" not in first


def test_budget_drops_the_oldest_but_keeps_the_latest_and_the_best():
    attempts = history(12)  # attempt 3, 7, 11 are correct at 1.8x
    attempts[6].feedback = Feedback("correct", "correct, 3.10x vs eager", "", 3.1)
    full = builder(10**6).build(attempts)
    prompt = builder(budget=full.tokens // 2).build(attempts)
    assert prompt.tokens <= full.tokens // 2 and not prompt.over_budget
    assert 12 in prompt.included and 7 in prompt.included
    assert prompt.dropped == sorted(prompt.dropped) and prompt.dropped[0] == 1
    assert "### Attempt 1\n" not in prompt.text and "### Attempt 7\n" in prompt.text


def test_budget_that_cannot_be_met_says_so():
    prompt = builder(budget=50).build(history(3))
    assert prompt.over_budget and prompt.included == [3]  # the latest, which is also the best


def test_a_real_tokenizer_can_count(tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    counting = PromptBuilder(
        load_templates(), RELU.read_text(), counter=lambda t: len(tokenizer(t).input_ids), counted_with="tokenizer"
    )
    prompt = counting.build(history(2))
    assert prompt.counted_with == "tokenizer" and prompt.tokens == len(tokenizer(prompt.text).input_ids)


def test_user_templates_override_the_shipped_ones(tmp_path):
    (tmp_path / "refine.md").write_text("\nDo better. ${nothing}\n")
    templates = load_templates(tmp_path)
    text = PromptBuilder(templates, "class Model: pass").build(history(1)).text
    assert "Do better." in text and "Restart your reasoning" not in text
    assert templates.version != load_templates().version


@pytest.mark.parametrize(
    ("answer", "code_has", "summary", "error"),
    [
        ("```python\n" + KERNEL + "```\nFused it.", "ext.relu", "Fused it.", None),
        ("```py\nx = 1\n```\n```\n" + KERNEL + "```\nDone.", "ModelNew", "Done.", None),
        (
            "draft:\n```python\nclass ModelNew: pass\n```\nfinal:\n```python\n" + KERNEL + "```\nok",
            "ext.relu",
            "ok",
            None,
        ),
        ("```python\n" + KERNEL + "```\n```cpp\nint main() {}\n```\nSummary.", "ext.relu", "```cpp", None),
        ("```python\n" + KERNEL, None, None, "not closed"),
        ("```python\nprint(1)\n```", None, None, "no Python code block defines class ModelNew"),
        ("I think the kernel is fine.", None, None, "no code block"),
    ],
)
def test_parse_reply(answer, code_has, summary, error):
    parsed = parse_reply(answer)
    if error is None:
        assert parsed.error is None
    else:
        assert error in parsed.error
    if code_has:
        assert code_has in parsed.code and summary in parsed.summary
    else:
        assert parsed.code is None


def test_feedback_from_verdicts_is_trimmed():
    errors = [{"file": "cuda.cu", "line": i, "message": f"error {i}", "candidate_line": i + 1} for i in range(40)]
    verdict = Verdict(Status.COMPILE_ERROR, "the build failed: error 0", details={"compiler_errors": errors})
    feedback = feedback_from_verdict(verdict)
    assert feedback.detail.count("\n") < 12 and "candidate line 1" in feedback.detail
    tb = "Traceback\n" + "\n".join(f"  frame {i}" for i in range(100)) + "\nRuntimeError: CUDA error"
    feedback = feedback_from_verdict(Verdict(Status.RUNTIME_ERROR, "boom", details={"traceback": tb}))
    assert feedback.detail.endswith("RuntimeError: CUDA error") and "frame 3\n" not in feedback.detail


@settings(max_examples=60, deadline=None)
@given(
    reasonings=st.lists(st.text(alphabet="abcdefghij klmnop", min_size=60, max_size=3000), min_size=1, max_size=8),
    with_summary=st.lists(st.booleans(), min_size=8, max_size=8),
    budget=st.integers(min_value=300, max_value=20000),
)
def test_no_prompt_contains_an_earlier_turns_reasoning(reasonings, with_summary, budget):
    attempts = []
    for i, reasoning in enumerate(reasonings):
        marker = f"REASONING-{i}-" + reasoning
        answer = f"```python\n{KERNEL}```\n" + ("It fuses two ops." if with_summary[i] else "")
        parsed = parse_reply(answer)
        summary = None if parsed.summary else excerpt_summary(marker)
        attempts.append((marker, make_attempt(i + 1, parsed, FEEDBACKS[i % 4], summary)))
        prompt = PromptBuilder(load_templates(), "class Model: pass", budget=budget).build([a for _, a in attempts])
        for j, (earlier, _) in enumerate(attempts):
            assert earlier not in prompt.text  # never the whole chain of thought
            if with_summary[j]:
                assert f"REASONING-{j}-" not in prompt.text  # with a summary, none of it
        assert estimate_tokens(prompt.text) == prompt.tokens
