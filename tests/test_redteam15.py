"""Attacks a fifteenth red team wrote against the host's handling of what the model and the candidate send it: the
reply parser, the worker protocol, the scans of C++ text and `apply`'s reading of an accepted kernel file
(tests/candidates/redteam15/, each file's docstring says the attack, its true verdict and what it got before the fix)."""

from __future__ import annotations

import contextlib
import random
import re
import time

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.evaluator.host.cpp_text import strip_c_comments
from kevin_tui.evaluator.host.static_checks import cpp_torch_compute, run_static_checks
from kevin_tui.evaluator.protocol import ProtocolViolation, parse_event
from kevin_tui.evaluator.verdict import Status
from kevin_tui.protocol.parse import parse_reply
from kevin_tui.repo import AcceptInfo, kernel_file_text
from kevin_tui.usermodel import apply as apply_module
from tests.conftest import candidate

HOST_BOUND_S = (
    10.0  # each of the host's jobs below took minutes to hours before (quadratic): this bounds it, times nothing
)


# -- the worker protocol ------------------------------------------------------------------------------------------


def _nested_event(depth: int) -> bytes:
    return b'{"event":"crash","message":"\\ud800","traceback":"x","z":' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("depth", [300, 500, 700, 900])
def test_an_event_nested_too_deeply_for_the_hosts_text_walk_is_a_protocol_violation(depth):
    """nested_surrogate_event_kills_reader.py: JSON that json.loads takes (nested ~700 deep) with an escaped lone
    surrogate went on to `whole_text`, a recursive walk of two frames a level, whose RecursionError escaped
    `parse_event` and killed the host's reader thread: the candidate got `timeout` after its whole deadline, and the
    host's stderr a traceback. Whatever the depth, the event is read or is a protocol violation."""
    with contextlib.suppress(ProtocolViolation):  # the only failure allowed (here: an unexpected field, or too deep)
        parse_event("candidate", _nested_event(depth))


def _build_request(functions: str) -> bytes:
    return (
        b'{"event":"build_request","kind":"inline","name":"x","cpp_sources":["int f();"],"cuda_sources":[],"sources":[],'
        b'"functions":' + functions.encode() + b',"extra_cflags":[],"extra_cuda_cflags":[],"extra_ldflags":[],'
        b'"extra_include_paths":[],"with_cuda":null,"no_implicit_headers":false}'
    )


def test_a_build_request_nested_past_the_hosts_stack_is_a_protocol_violation():
    """nested_build_request_crashes_host.py: a `functions` mapping whose value is a list nested 988 deep was decoded by
    the reader thread and then overflowed the build key's json.dumps on the host's deeper main thread: `eval` exited
    with a RecursionError traceback, no verdict. No event may nest deeper than a few levels now."""
    with pytest.raises(ProtocolViolation):  # "not JSON" where this stack is deeper than the reader's
        parse_event("candidate", _build_request('{"f": ' + "[" * 988 + "]" * 988 + "}"))
    with pytest.raises(ProtocolViolation, match="nested more than"):
        parse_event("candidate", _build_request('{"f": ' + "[" * 40 + "]" * 40 + "}"))


def test_an_honest_build_request_and_profile_rows_still_parse():
    """Honest counterpart: load_inline's `functions` as a list or as a mapping of docstrings."""
    assert parse_event("candidate", _build_request('["f"]'))["functions"] == ["f"]
    assert parse_event("candidate", _build_request('{"f": "the doc"}'))["functions"] == {"f": "the doc"}


def test_end_to_end_a_nested_build_request_is_rejected_not_a_host_crash(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate(candidate("redteam15/nested_build_request_crashes_host.py"))
    assert verdict.status is Status.REJECTED and "nested more than" in verdict.message, verdict.message


def test_a_readable_event_with_a_lone_surrogate_is_still_made_whole():
    event = parse_event("candidate", b'{"event":"crash","message":"bad \\ud800","traceback":"t"}')
    assert event["message"] == "bad \ufffd"


def test_an_event_the_host_cannot_read_ends_the_run_at_once_as_a_protocol_violation(relu_problem, build_cache):
    """End to end: `rejected` (protocol violation) within seconds, not `timeout` after the load deadline."""
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache, timeout_s=60)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        started = time.monotonic()
        verdict = evaluator.evaluate(candidate("redteam15/nested_surrogate_event_kills_reader.py"))
        assert time.monotonic() - started < 45
    assert verdict.status is Status.REJECTED and "protocol violation" in verdict.message, verdict.message


# -- the reply parser ---------------------------------------------------------------------------------------------


def test_a_reply_of_blank_lines_is_parsed_in_linear_time():
    """`^\\s*class\\s+ModelNew` (re.M) ran from every line start over all the blank lines after it: 40,000 blank lines
    in a code block took the host 5 s, a 1 MB reply (answer or reasoning) would have held the loop for hours."""
    blank = "```python\n" + "  \t\n" * 250_000 + "x = 1\n```\n"
    started = time.perf_counter()
    assert parse_reply(blank).code is None
    assert parse_reply("no kernel here", blank).code_in_reasoning is None
    assert time.perf_counter() - started < HOST_BOUND_S


@pytest.mark.parametrize(
    "body",
    ["class ModelNew(nn.Module):\n    pass\n", "if True:\n    class  ModelNew:\n        pass\n",
     "\n\n\tclass\tModelNew(Model): ...\n"],
)  # fmt: skip
def test_an_honest_kernel_block_is_still_found(body):
    parsed = parse_reply(f"Here it is.\n\n```python\nimport torch\n{body}```\nFaster.")
    assert parsed.code == f"import torch\n{body}"
    assert parsed.summary == "Faster."


# -- the scans of C++ text ----------------------------------------------------------------------------------------


def test_the_comment_stripper_is_linear_in_the_candidates_text():
    """unclosed_comment_scan_times_out_honest.py: `/* ` repeated in a C++ string literal made `strip_c_comments`
    (the start of every scan of the candidate's C++: the built text, the module's strings) quadratic: 60 KB took 14 s,
    1 MB would have held the host about an hour, charged to the candidate's load phase or to no deadline at all.
    Four times the text (200 KB) must take well under the sixteen times a quadratic scan needs (the faster of two
    runs of each, interleaved, so a loaded machine slows both sides alike) and stay within the host's bound: a
    quadratic scan would take minutes there."""

    def scans(repeats: int) -> float:
        started = time.perf_counter()
        assert strip_c_comments("/* " * repeats) == "/* " * repeats
        assert cpp_torch_compute('const char* s = "' + "/* " * repeats + '";\nat::relu(x);') == ["at::relu"]
        source = 'KERNEL = """const char* s = "' + "/* " * repeats + '";"""\n'
        assert "no_custom_kernel" in {w.code for w in run_static_checks(source)}
        return time.perf_counter() - started

    small, large = [], []
    for _ in range(2):
        small.append(scans(16_500))
        large.append(scans(66_000))
    assert min(large) / min(small) < 9, (small, large)
    assert min(large) < HOST_BOUND_S


def test_the_comment_stripper_drops_what_it_dropped_before():
    """Honest counterpart: where no literal is involved the same comments go as with the regex it replaces (leftmost
    first, a `/*` with no `*/` after it kept; each now a space, as the compiler has it), so a compute call in a comment
    is still no finding and one outside still is."""
    old = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
    draw = random.Random(15)
    pieces = ["/", "*", "\n", "a", " ", "/*", "*/", "//"]
    for _ in range(20_000):
        text = "".join(draw.choice(pieces) for _ in range(draw.randint(0, 24)))
        assert strip_c_comments(text) == old.sub(" ", text), repr(text)
    assert cpp_torch_compute("/* at::relu(x) */ // at::mm(a, b)\nauto y = at::empty_like(x);") == []
    assert cpp_torch_compute("/* note */ auto y = at::relu(x); // done") == ["at::relu"]


# Code between literals that hold a comment's ends, as the compiler reads it: not a comment.
CODE_BETWEEN_LITERALS = {
    "strings": 'const char* a = "/*";\nauto y = at::relu(x);\nconst char* b = "*/";',
    "an escaped quote": 'const char* a = "\\"/*";\nauto y = at::relu(x);\n"*/";',
    "a raw string": 'const char* a = R"x(")/*)x";\nauto y = at::relu(x);\n"*/";',
    "a raw string whose delimiter holds a quote": 'const char* a = R"q"(")/*)q"";\nauto y = at::relu(x);\n"*/";',
    "a character literal": 'char q = \'"\'; const char* a = "/*"; auto y = at::relu(x); "*/";',
    "a digit separator": 'int n = 1\'000; char q = \'"\'; const char* a = "/*"; auto y = at::relu(x); "*/";',
    "a comment's start made by a line splice": "/\\\n* note */ auto y = at::relu(x);",
}


@pytest.mark.parametrize("how", sorted(CODE_BETWEEN_LITERALS))
def test_code_between_literals_that_look_like_a_comment_is_code(how):
    assert cpp_torch_compute(CODE_BETWEEN_LITERALS[how]) == ["at::relu"], how


def test_a_comment_made_by_the_compilers_own_rules_still_hides_nothing_it_should_not():
    """Honest counterparts: a `//` comment a line splice continues is comment to the compiler too, a comment between
    two halves of a name splits it (the compiler reads a space)."""
    assert cpp_torch_compute("// note \\\nauto y = at::relu(x);\nauto z = at::empty_like(x);") == []
    assert cpp_torch_compute("auto y = at::re/**/lu(x);") == []
    # a literal is kept as written, so a `//` in one starts no comment and a call spelled in one stays a finding
    assert cpp_torch_compute('const char* s = "//"; auto y = at::relu(x);') == ["at::relu"]


def test_the_module_sees_a_call_between_comment_like_strings():
    """comment_in_string_hides_at_call.py: the module's static checks reported nothing (only the library's symbols and
    the runtime count caught it under --strict); the text scan reads it as code now."""
    assert "torch_compute_ops" in {
        w.code for w in run_static_checks(candidate("redteam15/comment_in_string_hides_at_call.py"))
    }


# -- apply's reading of the accepted kernel file -------------------------------------------------------------------


def _apply_message(tmp_path, monkeypatch, info: AcceptInfo, source: str) -> str:
    kernel = tmp_path / "blocks_kernel.py"
    kernel.write_text(kernel_file_text(source, info))
    monkeypatch.setattr(apply_module, "origin_of", lambda problem: {"class": "GeluGate", "class_file": "blocks.py"})
    applied = apply_module.Applied(kernel, tmp_path / "blocks_apply.py", None, None)
    return apply_module.commit_message(applied, None, kernel, [], "blocks_apply.py")  # type: ignore[arg-type]


FORGED = "# Kevin kernel for blocks: 50.00x vs eager\n# session ../elsewhere, turn 1\nclass ModelNew: pass\n"


def test_a_kernels_own_header_lines_are_not_read_as_kevin_tuis(tmp_path, monkeypatch):
    """A kernel accepted with no speed measured (`eval --accept --no-timing`: its header says "speedup not measured")
    whose source carries a line of the header's form had it read by apply: its commit said "Kernel alone: 50.00x vs
    eager", a speedup nobody measured, in the user's history. Only the two lines kevin-tui wrote are read."""
    message = _apply_message(tmp_path, monkeypatch, AcceptInfo("blocks"), FORGED)
    assert "50.00x" not in message and "Kernel alone" not in message
    kernel = tmp_path / "blocks_kernel.py"
    applied = apply_module.Applied(kernel, tmp_path / "blocks_apply.py", None, None)
    assert apply_module.record_in_session(applied, tmp_path) is None


def test_the_headers_own_speedup_is_still_in_the_apply_commit(tmp_path, monkeypatch):
    """Honest counterpart: a measured kernel's speedup, from the header kevin-tui wrote, is reported as before."""
    message = _apply_message(tmp_path, monkeypatch, AcceptInfo("blocks", speedup=2.31), FORGED)
    assert "Kernel alone: 2.31x vs eager" in message
