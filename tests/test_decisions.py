"""One table decides a verdict's status (host/decisions.py): what outranks what, and nothing else sets one."""

import ast
from pathlib import Path

import pytest

from kevin_tui.evaluator.host.decisions import Finding, decide, finding_of, overrule, settle, without_device
from kevin_tui.evaluator.verdict import Status

HOST = Path(__file__).resolve().parents[1] / "kevin_tui" / "evaluator" / "host"


def test_a_changed_cache_outranks_everything_and_a_failed_build_what_yields_to_it():
    build = decide(Finding.BUILD_FAILED, "the build failed (relu): error")
    cache = decide(Finding.CACHE_CHANGED, "the build cache entry x was changed")
    correct = decide(Finding.CORRECT, "correct, 1.2x")
    timed_out = decide(Finding.TIMED_OUT, "no result within 60 s")
    violation = decide(Finding.PROTOCOL_VIOLATION, "protocol violation: an event out of turn")
    assert settle(correct, build, cache) is cache
    assert settle(timed_out, build, None) is build  # the build explains what happened after it
    assert settle(violation, build, None) is violation  # breaking the protocol is not explained by a build
    assert settle(correct, None, None) is correct
    assert settle(decide(Finding.WRONG_OUTPUT, "max abs diff 3"), None, None).status is Status.INCORRECT


def test_the_workers_own_report_can_only_be_a_failure():
    reported = decide(Finding.REPORTED_BY_WORKER, "no ModelNew", status=Status.FORMAT_ERROR)
    assert reported.status is Status.FORMAT_ERROR and finding_of(reported) is Finding.REPORTED_BY_WORKER
    for claimed in (Status.CORRECT, Status.COMPILED, Status.TIMEOUT, None):
        with pytest.raises(ValueError):
            decide(Finding.REPORTED_BY_WORKER, "trust me", status=claimed)


def test_an_overruling_pass_names_itself_and_drops_the_speedups():
    verdict = decide(Finding.CORRECT, "correct, 3.0x")
    verdict.speedup, verdict.speedup_interval = 3.0, [2.5, 3.5]
    overrule(verdict, Finding.STRICT, "rejected under --strict: no_custom_kernel", "unstrict_status")
    assert verdict.status is Status.REJECTED and verdict.speedup is None and verdict.speedup_interval is None
    assert finding_of(verdict) is Finding.STRICT and verdict.details["unstrict_status"] == "correct"


def is_table(func: ast.Attribute) -> bool:
    return isinstance(func.value, ast.Name) and func.value.id == "decisions"


def test_without_a_gpu_only_a_failure_a_missing_gpu_explains_is_compiled():
    """An nvcc build on a CPU evaluation (redteam9's unused_cuda_build_hides_a_wrong_answer.py): every verdict was
    `compiled`, which ranks above `incorrect`. Now a wrong answer is `incorrect` unless forward called the nvcc-built
    code (an unchecked launch leaves its output unwritten), and a failure is `compiled` only where it names CUDA."""
    wrong = decide(Finding.WRONG_OUTPUT, "wrong output in trial 1: 512 of 512 values outside tolerance")
    assert without_device(wrong, cuda_called=False) is wrong
    called = without_device(wrong, cuda_called=True)
    assert called.status is Status.COMPILED and finding_of(called) is Finding.BUILT_WITHOUT_DEVICE
    assert "512 of 512" in called.message and called.details["without_device"]
    checked = decide(Finding.REPORTED_BY_WORKER, "forward (trial 1) raised RuntimeError: Expected x.is_cuda() to be "
                     "true", status=Status.RUNTIME_ERROR)  # fmt: skip
    assert without_device(checked, cuda_called=False).status is Status.COMPILED
    plain = decide(Finding.REPORTED_BY_WORKER, "forward raised ValueError: bad", status=Status.RUNTIME_ERROR)
    assert without_device(plain, cuda_called=False) is plain
    for kept in (decide(Finding.CORRECT, "correct, 1.0x"), decide(Finding.CLOCK_DISAGREES, "the clock disagrees"),
                 decide(Finding.REPORTED_BY_WORKER, "the candidate replaced torch.cuda.synchronize", status=Status.REJECTED),
                 decide(Finding.BUILD_FAILED, "the build failed (x): nvcc error")):  # fmt: skip
        assert without_device(kept, cuda_called=True) is kept


def test_no_host_module_but_the_table_sets_a_status():
    """A `Verdict(Status.X, ...)` or `.overrule(Status.X, ...)` anywhere else in the host would be a second
    place deciding a status."""
    found = []
    for path in sorted(HOST.glob("*.py")):
        if path.name == "decisions.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and (
                (isinstance(node.func, ast.Name) and node.func.id == "Verdict")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "overrule" and not is_table(node.func))
            ):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []
