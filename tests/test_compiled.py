"""`--compiled`: a candidate correct eagerly is judged under torch.compile too, in its sandboxed worker, its
output compared by the reference worker (issue 20). Real g++ builds of the extensions, real inductor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kevin_tui.arguments import build_parser, eval_options
from kevin_tui.config import Settings
from kevin_tui.evaluator import EvalOptions, Evaluator, Status, Verdict
from kevin_tui.evaluator.host.compiled import SOURCE
from kevin_tui.evaluator.report import render
from tests.conftest import candidate


@pytest.fixture(scope="module")
def compiled(relu_problem, build_cache) -> Iterator[Evaluator]:
    options = EvalOptions(device="cpu", timing=False, shapes="off", compiled=True, trials=2, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


def breaks_warning(verdict: Verdict) -> str | None:
    return next((w.message for w in verdict.warnings if w.code == "graph_breaks"), None)


def test_a_cpp_kernel_registered_as_a_custom_op_is_correct_under_compile_with_no_graph_break(compiled):
    verdict = compiled.evaluate(candidate("compiled/relu_custom_op_cpp.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert verdict.evidence["compiled"]["graph_breaks"] == 0 and verdict.evidence["compiled"]["trials"] == 2
    assert "informational" in verdict.evidence["compiled"]["graph_breaks_source"]
    assert breaks_warning(verdict) is None
    assert "torch_compute_at_runtime" not in {w.code for w in verdict.warnings}  # its op is not PyTorch's
    assert "torch.compile: the same outputs on 2 trial(s); 0 graph break(s), counted by" in render(verdict)
    judged = [c.name for c in verdict.checks if "under torch.compile" in c.name]
    assert judged == ["output trial 1 under torch.compile", "output trial 2 under torch.compile"]


def test_an_extension_call_dynamo_cannot_trace_is_correct_with_its_graph_break_reported(compiled):
    verdict = compiled.evaluate(candidate("relu_cpp.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert verdict.evidence["compiled"]["graph_breaks"] >= 1
    said = breaks_warning(verdict)
    assert said is not None and "graph break" in said and "informational, not checked" in said


def test_a_custom_op_whose_fake_lies_fails_under_compile(compiled):
    verdict = compiled.evaluate(candidate("compiled/relu_custom_op_lying_fake_cpp.py"))
    assert verdict.status is Status.RUNTIME_ERROR, verdict.message
    assert verdict.message.startswith("fails under torch.compile: forward under torch.compile (trial 1) raised")


def test_the_host_judges_the_compiled_output(compiled):
    verdict = compiled.evaluate(candidate("compiled/relu_custom_op_differs_compiled_cpp.py"))
    assert verdict.status is Status.INCORRECT, verdict.message
    assert verdict.message.startswith("fails under torch.compile: wrong output in trial 1 under torch.compile: shape")


def test_plain_torch_is_correct_under_compile(compiled):
    """Inductor generates and compiles C++ for it, with a cache of the candidate's own (the slow one)."""
    verdict = compiled.evaluate(candidate("relu_torch.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert verdict.evidence["compiled"] == {"trials": 2, "graph_breaks": 0, "break_reasons": [],
                                            "graph_breaks_source": SOURCE}  # fmt: skip


@pytest.mark.parametrize("command", [["eval", "p.py", "k.py"], ["optimize", "p.py"], ["batch", "p.py"]])
def test_eval_optimize_and_batch_take_compiled(command):
    parser = build_parser()
    assert eval_options(parser.parse_args([*command, "--compiled"]), Settings()).compiled is True
    assert eval_options(parser.parse_args(command), Settings()).compiled is False


def test_a_custom_op_wrapping_pytorch_is_seen_as_pytorch_compute(compiled):
    verdict = compiled.evaluate(candidate("compiled/relu_custom_op_torch.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    seen = next(w.message for w in verdict.warnings if w.code == "torch_compute_at_runtime")
    assert "aten::relu" in seen and "relu_wrapped" not in seen


def test_a_candidate_cannot_write_the_compile_cache_its_own_is_copied_from(compiled):
    verdict = compiled.evaluate(candidate("compiled/plants_in_the_compile_seed.py"))
    assert verdict.status is Status.INCORRECT, verdict.message  # it ran: the seed was there, the write refused
    assert not (compiled.reference.compile_cache() / "planted.py").exists()
    assert verdict.sandbox in ("bwrap", "unshare")
