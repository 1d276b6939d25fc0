"""Prompts turn by turn (golden files), the budget, reply parsing, and reasoning never resent."""

from __future__ import annotations

import ast
import os
from dataclasses import asdict
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kevin_tui.evaluator.verdict import Status, Verdict
from kevin_tui.models.base import Reply
from kevin_tui.models.think import ThinkSplitter
from kevin_tui.protocol.feedback import Feedback, feedback_from_verdict
from kevin_tui.protocol.parse import excerpt_summary, parse_reply
from kevin_tui.protocol.prompt import NO_CODE, Attempt, PromptBuilder, estimate_tokens
from kevin_tui.protocol.summary import SUMMARY_MAX_TOKENS, make_attempt, summary_from, summary_request
from kevin_tui.protocol.templates import NAMES, TemplateError, load_templates
from tests.conftest import KERNELBENCH, RELU

GOLDEN = Path(__file__).parent / "golden"
REPLIES = Path(__file__).parent / "replies"  # raw model outputs with patterns found in real replies
SUMMARY = "I replaced torch.relu with a grid-stride CUDA kernel that writes max(x, 0) in one pass."
PAPER = GOLDEN / "kevin-protocol.md"  # the paper's Appendix D, transcribed
SETS = ("kevin", "kevin-tui")
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
EVERY_STATUS = [
    Feedback("format_error", "the code block is not closed (was the reply cut off at the token limit?)"),
    *FEEDBACKS[:2],
    Feedback(
        "runtime_error",
        "CUDA error: an illegal memory access was encountered",
        'File "candidate.py", line 40, in forward\nRuntimeError: CUDA error: an illegal memory access was encountered',
    ),
    Feedback("timeout", "running the candidate took longer than 60 s (trial 1)"),
    Feedback("rejected", "torch.allclose was replaced after import"),
    Feedback("compiled", "built with nvcc; no CUDA device here to run it"),
    Feedback("correct", "correct, 1.23x vs eager", "", 1.234, 1.18, 1.29),
    Feedback("correct", "correct, 1.02x vs eager", "", 1.02, 0.97, 1.08),
    Feedback("correct", "correct, 0.50x vs eager", "", 0.5),
]
NOTE = "Try vectorized float4 loads."
SPEED_OF_LIGHT = "The least time this problem can take on this GPU is 0.021 ms (memory-bound: 2.1 MB at 4.8 TB/s)."


def attempts_with(feedbacks: list[Feedback]) -> list[Attempt]:
    return [
        Attempt(
            i + 1,
            None if feedback.status == "format_error" else KERNEL.replace("relu", f"relu_v{i + 1}"),
            f"Attempt {i + 1} used a grid-stride loop.",
            feedback,
        )
        for i, feedback in enumerate(feedbacks)
    ]


def history(n: int) -> list[Attempt]:
    return attempts_with([FEEDBACKS[i % 4] for i in range(n)])


def builder(budget: int = 8192, template_set: str | None = None, **options) -> PromptBuilder:
    return PromptBuilder(load_templates(template_set), RELU.read_text(), budget=budget, **options)


def edited_with_note(template_set: str) -> str:
    attempts = history(2)
    attempts[-1].edited_by_user = True
    return builder(template_set=template_set).build(attempts, NOTE).text


def over_budget(template_set: str) -> str:
    attempts = history(6)
    full = builder(10**6, template_set).build(attempts)
    prompt = builder(full.tokens - 150, template_set).build(attempts)
    assert prompt.dropped and not prompt.over_budget
    return prompt.text


SCENARIOS = {
    "turn1": lambda s: builder(template_set=s).build([]).text,
    "turn1_note_speed_of_light": lambda s: builder(template_set=s, speed_of_light=SPEED_OF_LIGHT).build([], NOTE).text,
    "every_feedback": lambda s: builder(template_set=s).build(attempts_with(EVERY_STATUS)).text,
    "edited_with_note": edited_with_note,
    "over_budget": over_budget,
}


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("template_set", SETS)
def test_golden_prompts(template_set, scenario):
    text = SCENARIOS[scenario](template_set)
    golden = GOLDEN / template_set / f"{scenario}.txt"
    if os.environ.get("KEVIN_TUI_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), f"prompt changed; rerun with KEVIN_TUI_UPDATE_GOLDEN=1 if intended ({golden})"


def paper_listing() -> tuple[str, list[str]]:
    """The instruction paragraph and the single-line sentences of the paper's listing, unwrapped."""
    if not PAPER.exists():
        pytest.skip(f"the transcription of Kevin's prompt is not at {PAPER}")
    listing = [line[4:] for line in PAPER.read_text().splitlines() if line.startswith("    ")]
    start = next(i for i, line in enumerate(listing) if line.startswith("Replace pytorch operators"))
    end = next(i for i in range(start, len(listing)) if listing[i].endswith("Here is an example:"))
    return " ".join(listing[start : end + 1]), listing


def test_the_kevin_set_is_the_papers_text_around_kernelbenchs_example():
    instruction, listing = paper_listing()
    assert listing[0] == "You are given the following architecture:" and instruction.endswith("Here is an example:")
    problem = RELU.read_text().rstrip("\n")
    example = (KERNELBENCH / "prompts" / "model_new_ex_add.py").read_text()
    first = builder().build([]).text  # the default set
    assert first == f"{listing[0]}\n```\n{problem}\n```\n\n{instruction}\n```\n{example}```\n"


def test_later_turns_are_the_papers_text_with_one_fixed_sentence_per_result():
    instruction, listing = paper_listing()
    sentence = {
        status: next(line.split(" <")[0] for line in listing if line.startswith(opening))
        for status, opening in [
            ("format_error", "Your previous answer failed to be parsed"),
            ("compile_error", "Your previous answer failed to compile"),
            ("runtime_error", "Your previous answer compiled successfully but"),
            ("incorrect", "Your previous answer was incorrect"),
            ("correct", "Your previous answer was correct"),
        ]
    }
    feedbacks = [f for f in EVERY_STATUS if f.status in sentence][:5]
    attempts = attempts_with(feedbacks)
    results = [f"{sentence[f.status]} {f.speedup_text if f.status == 'correct' else f.error}" for f in feedbacks]
    shown = "".join(
        f"```\n{(a.code or NO_CODE).rstrip()}\n```\n\n{a.summary}\n\n{result}\n\n"
        for a, result in zip(attempts, results, strict=True)
    )
    base = f"{listing[0]}\n```\n{RELU.read_text().rstrip()}\n```\n\n{instruction.removesuffix('Here is an example:')}"
    assert "Here are your previous attempts:" in listing
    restart = "Restart your reasoning process and generate new, complete code."
    assert restart in listing
    assert builder().build(attempts).text == f"{base}\n\nHere are your previous attempts:\n\n{shown}{restart}\n"
    assert results[-1].endswith("baseline: 1.23 (95% interval 1.18-1.29)")


@pytest.mark.parametrize("template_set", SETS)
def test_every_status_has_a_sentence_and_no_template_comment_reaches_the_model(template_set):
    templates = load_templates(template_set)
    for status in Status:
        assert templates.feedback(status.value, error="E", speedup="S", message="M", detail="D").strip()
    texts = [scenario(template_set) for scenario in SCENARIOS.values()]
    assert not any(marker in text for text in texts for marker in ("<!--", "-->", "Baronio", "MIT", "Permission"))


def test_the_first_turn_has_the_example_and_later_turns_do_not():
    for template_set in SETS:
        first = builder(template_set=template_set).build([]).text
        later = builder(template_set=template_set).build(history(1)).text
        assert "add_kernel" in first and "add_kernel" not in later
        assert "class Model(nn.Module)" in first and "ext.relu_v1" in later
        assert "Restart your reasoning" in later and "Restart your reasoning" not in first


def test_the_speed_of_light_line_is_on_the_first_turn_only_after_the_example_and_can_be_removed(tmp_path):
    for template_set in SETS:
        with_line = builder(template_set=template_set, speed_of_light=SPEED_OF_LIGHT)
        first = with_line.build([], NOTE).text
        assert first.index("add_kernel") < first.index(SPEED_OF_LIGHT) < first.index(NOTE)
        assert SPEED_OF_LIGHT not in with_line.build(history(1)).text
    (tmp_path / "refine.md").write_text("Again.\n")  # speed_of_light.md missing: the default set's is used
    assert (
        SPEED_OF_LIGHT
        in PromptBuilder(load_templates(tmp_path), "class Model: pass", speed_of_light=SPEED_OF_LIGHT).build([]).text
    )
    (tmp_path / "speed_of_light.md").write_text("")
    removed = PromptBuilder(load_templates(tmp_path), "class Model: pass", speed_of_light=SPEED_OF_LIGHT).build([]).text
    assert (
        SPEED_OF_LIGHT not in removed
        and removed == PromptBuilder(load_templates(tmp_path), "class Model: pass").build([]).text
    )


def test_template_sets_load_by_name_by_path_and_as_overrides(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kevin, kevin_tui = load_templates("kevin"), load_templates("kevin-tui")
    assert load_templates().texts == kevin.texts and kevin.version != kevin_tui.version
    assert load_templates(Path("kevin-tui")).texts == kevin_tui.texts  # the CLI passes --prompts as a Path
    with pytest.raises(TemplateError, match="neither a directory nor a template set"):
        load_templates(Path("kevin-2"))
    (tmp_path / "kevin-tui").mkdir()  # a directory of that name is taken as overrides of the default set
    (tmp_path / "kevin-tui" / "note.md").write_text("<!-- mine -->\nPlease: ${note}\n")
    overridden = load_templates(Path("kevin-tui"))
    assert overridden.texts == {**kevin.texts, "note": "Please: ${note}\n"}
    (tmp_path / "kevin-tui" / "note.md").write_text(
        "<!-- a comment is not part of the text -->\n" + kevin.texts["note"]
    )
    assert load_templates(Path("kevin-tui")).version == kevin.version


def test_an_override_file_no_template_reads_is_an_error_that_lists_the_templates(tmp_path):
    (tmp_path / "feedbak.md").write_text("Typo.\n")
    (tmp_path / ".editorconfig").write_text("")  # hidden files are not templates, nor mistakes
    with pytest.raises(TemplateError, match=r"feedbak\.md is no template's file.*feedback\.md") as caught:
        load_templates(tmp_path)
    assert all(f"{name}.md" in str(caught.value) for name in NAMES)


def test_prompts_export_writes_the_templates_which_a_project_then_uses(tmp_path, monkeypatch):
    from kevin_tui.arguments import build_parser, run_config
    from kevin_tui.cli import main
    from kevin_tui.config import Settings
    from kevin_tui.protocol.templates import project_prompts

    monkeypatch.chdir(tmp_path)
    assert project_prompts() is None and run_config(build_parser().parse_args(["optimize", "p.py"]),
                                                    Settings()).problem.prompts is None  # fmt: skip
    with pytest.raises(SystemExit) as done:
        main(["prompts", "export"])
    assert done.value.code == 0
    exported = tmp_path / "prompts"
    assert sorted(p.name for p in exported.iterdir()) == sorted(f"{n}.md" for n in NAMES)
    assert load_templates(exported).texts == load_templates().texts  # the shipped text, comments and all
    (exported / "note.md").write_text("Mine: ${note}\n")
    with pytest.raises(SystemExit):
        main(["prompts", "export"])  # again: the edited file is kept
    assert (exported / "note.md").read_text() == "Mine: ${note}\n"
    config = run_config(build_parser().parse_args(["optimize", "p.py"]), Settings())
    assert config.problem.prompts == exported.resolve()  # picked up without --prompts
    templates = load_templates(config.problem.prompts)
    assert templates.texts["note"] == "Mine: ${note}\n" and templates.source == f"{exported.resolve()} (over kevin)"
    named = run_config(build_parser().parse_args(["optimize", "p.py", "--prompts", "kevin-tui"]), Settings())
    assert load_templates(named.problem.prompts).source == "kevin-tui"  # --prompts wins


@pytest.mark.parametrize("template_set", SETS)
def test_each_shipped_set_has_every_template(template_set):
    shipped = resources.files("kevin_tui.prompts") / template_set
    assert sorted(p.name for p in shipped.iterdir() if p.name.endswith(".md")) == sorted(f"{n}.md" for n in NAMES)


@pytest.mark.parametrize("template_set", SETS)
def test_budget_drops_the_oldest_but_keeps_the_latest_and_the_best(template_set):
    attempts = history(12)  # attempt 3, 7, 11 are correct at 1.8x
    attempts[6].feedback = Feedback("correct", "correct, 3.10x vs eager", "", 3.1)
    full = builder(10**6, template_set).build(attempts)
    prompt = builder(full.tokens // 2, template_set).build(attempts)
    assert prompt.tokens <= full.tokens // 2 and not prompt.over_budget
    assert 12 in prompt.included and 7 in prompt.included
    assert prompt.dropped == sorted(prompt.dropped) and prompt.dropped[0] == 1
    assert "ext.relu_v1(" not in prompt.text and "ext.relu_v7(" in prompt.text


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
    assert text.endswith("\n\nDo better. ${nothing}\n") and "Restart your reasoning" not in text
    assert templates.version != load_templates().version


def test_a_hand_edited_kernel_is_marked_and_the_summary_stays_the_models():
    parsed = parse_reply("```python\n" + KERNEL + "```\nFused it.")
    attempt = make_attempt(1, parsed, FEEDBACKS[2], edited_code=KERNEL.replace("relu", "relu_mine"))
    assert attempt.edited_by_user and attempt.summary == "Fused it." and "relu_mine" in attempt.code
    text = builder().build([attempt]).text
    assert (
        "Fused it.\n\nThe user edited this code by hand before it was evaluated.\n\nYour previous answer was correct"
        in text
    )


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
        ("```python\n" + KERNEL + "```\n```cpp\nint main() {}\n```\nSummary.", "ext.relu", "Summary.", None),
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
        assert code_has in parsed.code and summary == parsed.summary
    else:
        assert parsed.code is None


def reply_fixture(name: str) -> tuple[str, str]:
    """(reasoning, answer) of a raw model output in tests/replies, split as every backend splits it."""
    splitter = ThinkSplitter(starts_in_reasoning=True)
    reply = Reply()
    for delta in [*splitter.feed((REPLIES / f"{name}.txt").read_text()), *splitter.flush()]:
        reply.add(delta)
    return reply.reasoning, reply.answer


IN_REASONING = "a complete ModelNew block is only in the reasoning, before </think>"
CORPUS = {  # fixture: (kernel used, summary, error, kernel offered from the reasoning)
    "stray_fence_before_python": (True, SUMMARY, None, False),
    "stray_fence_before_prose": (True, SUMMARY, None, False),
    "python_fence_twice": (True, SUMMARY, None, False),
    "code_after_summary": (True, f"{SUMMARY}\n\nThe launch uses 256 threads per block.", None, False),
    "unclosed_block_after_summary": (True, SUMMARY, None, False),
    "stray_fence_after_kernel": (True, None, None, False),
    "tags_in_answer": (True, f"{SUMMARY} No <think> tags were harmed; </think> is text here.", None, False),
    "kernel_only_in_reasoning": (False, None, f"the reply has no code block; {IN_REASONING}", True),
    "no_think_close": (False, None, f"the reply has no answer after its reasoning; {IN_REASONING}", True),
    "cut_off_in_code": (False, None, "the code block is not closed (was the reply cut off at the token limit?)", False),
    "empty_answer": (False, None, "the reply has no answer after its reasoning", False),
}


@pytest.mark.parametrize("name", CORPUS)
def test_real_reply_patterns(name):
    used, summary, error, offered = CORPUS[name]
    reasoning, answer = reply_fixture(name)
    parsed = parse_reply(answer, reasoning)
    assert (parsed.code is not None, parsed.summary, parsed.error, parsed.code_in_reasoning is not None) == (
        used,
        summary,
        error,
        offered,
    )
    for code in filter(None, (parsed.code, parsed.code_in_reasoning)):
        ast.parse(code)  # no fence line swallowed into the code
        assert code.startswith("import torch\n") and code.endswith("return ext.clamp_zero(x)\n")


def test_every_reply_fixture_is_in_the_corpus():
    assert sorted(p.stem for p in REPLIES.glob("*.txt")) == sorted(CORPUS)


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from(["```", "```python", "```cpp", "class ModelNew:", "    pass", "Prose.", "import torch", ""]),
        max_size=14,
    )
)
def test_no_fence_line_ever_reaches_the_code_or_the_summary(pieces):
    parsed = parse_reply("\n".join(pieces))
    for text in filter(None, (parsed.code, parsed.summary)):
        assert not any(line.lstrip().startswith("```") for line in text.splitlines())
    assert parsed.code is None or "class ModelNew:" in parsed.code


def test_feedback_from_verdicts_is_trimmed():
    errors = [{"file": "cuda.cu", "line": i, "message": f"error {i}", "candidate_line": i + 1} for i in range(40)]
    verdict = Verdict(Status.COMPILE_ERROR, "the build failed: error 0", details={"compiler_errors": errors})
    feedback = feedback_from_verdict(verdict)
    assert feedback.detail.count("\n") < 12 and "candidate line 1" in feedback.detail
    tb = "Traceback\n" + "\n".join(f"  frame {i}" for i in range(100)) + "\nRuntimeError: CUDA error"
    feedback = feedback_from_verdict(Verdict(Status.RUNTIME_ERROR, "boom", details={"traceback": tb}))
    assert feedback.detail.endswith("RuntimeError: CUDA error") and "frame 3\n" not in feedback.detail


def test_feedback_carries_the_speedup_interval_and_old_sessions_still_load():
    verdict = Verdict(Status.CORRECT, "correct, 1.23x vs eager", speedup=1.234, speedup_interval=[1.18, 1.29])
    feedback = feedback_from_verdict(verdict)
    assert (feedback.speedup, feedback.speedup_low, feedback.speedup_high) == (1.234, 1.18, 1.29)
    recorded = {"status": "correct", "message": "correct, 1.80x vs eager", "detail": "", "speedup": 1.8}
    old = Feedback(**recorded)  # an attempt event written before the interval existed
    assert old.speedup_low is None and old.speedup_text == "1.80"
    assert Feedback(**asdict(feedback)) == feedback
    assert feedback_from_verdict(Verdict(Status.CORRECT, "correct", speedup=2.0)).speedup_low is None


@pytest.mark.parametrize(
    ("speedup", "interval", "text"),
    [
        (1.234, (1.18, 1.29), "1.23 (95% interval 1.18-1.29)"),
        (0.5, (0.45, 0.55), "0.50 (95% interval 0.45-0.55)"),
        (1.02, (0.97, 1.08), "no measurable difference (1.02, 95% interval 0.97-1.08)"),
        (1.02, (1.0, 1.05), "no measurable difference (1.02, 95% interval 1.00-1.05)"),
        (1.8, (None, None), "1.80"),
        (None, (None, None), "unknown"),
    ],
)
def test_how_a_speedup_is_told(speedup, interval, text):
    assert Feedback("correct", "m", "", speedup, *interval).speedup_text == text


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


def test_the_summary_follow_up_is_bounded_and_only_a_finished_plain_answer_is_kept():
    from kevin_tui.models.base import Reply, Sampling, StreamEnd

    templates = load_templates("kevin")
    prompt = PromptBuilder(templates, RELU.read_text()).build([])
    messages, sampling = summary_request(prompt, "```python\nx\n```", templates, Sampling(max_tokens=16384))
    assert messages[-2] == {"role": "assistant", "content": "```python\nx\n```"}
    assert "Summarize your changes" in messages[-1]["content"] and sampling.max_tokens == SUMMARY_MAX_TOKENS

    def answered(text: str, finish: str = "stop") -> Reply:
        return Reply(answer=text, end=StreamEnd(finish_reason=finish), complete=True)

    reasoning = "first I tried tiling. In the end I fused the clamp into one pass."
    assert summary_from(answered("Fused the clamp."), reasoning) == ("Fused the clamp.", "follow-up")
    for failed in (None, answered("Fused the", "length"), answered("```python\ncode\n```"), answered("  ")):
        text, source = summary_from(failed, reasoning)
        assert source == "excerpt" and text == excerpt_summary(reasoning) and text.endswith("into one pass.")
