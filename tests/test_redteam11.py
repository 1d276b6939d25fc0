"""Attacks an eleventh red team wrote against what follows the verdict: the session file, the RL export and the
protocol's text (tests/candidates/redteam11/, each file's docstring says the attack, its true verdict and what it
got before the fix)."""

from __future__ import annotations

import json

import pytest

from kevin_tui.evaluator.host.static_checks import cpp_torch_compute, run_static_checks
from kevin_tui.evaluator.protocol import parse_event
from kevin_tui.evaluator.verdict import Status, Verdict
from kevin_tui.session import Header, SessionWriter, load_session
from kevin_tui.session.events import EvaluationEvent, ReplyEvent
from tests.conftest import candidate

LONE = "bad \ud800 kernel \udfff"  # what json.loads makes of the escapes \ud800 and \udfff: no UTF-8 file holds it


def test_a_lone_surrogate_from_a_worker_arrives_as_text_a_file_can_hold():
    """A worker's event is JSON, where `\\ud800` is a valid escape: json.loads gives a string UTF-8 cannot encode."""
    line = json.dumps({"event": "crash", "message": LONE, "traceback": LONE}).encode()
    event = parse_event("candidate", line)
    for text in (event["message"], event["traceback"]):
        text.encode("utf-8")
        assert text.startswith("bad ") and text.endswith(" kernel \ufffd")


def test_a_candidate_raising_with_a_lone_surrogate_is_its_runtime_error_in_a_session_that_survives(strict, tmp_path):
    """surrogate_in_error.py: forward raised with `\\ud800` in its message; the verdict's message reached the session
    writer, which could not encode it, and the whole `optimize` (or batch run) stopped with a traceback."""
    verdict = strict.evaluate(candidate("redteam11/surrogate_in_error.py"))
    assert verdict.status == Status.RUNTIME_ERROR, verdict.message
    assert "kernel" in verdict.message
    json.dumps(verdict.to_dict(), ensure_ascii=False).encode("utf-8")


def test_a_session_keeps_an_event_no_utf8_file_can_hold(tmp_path):
    """Whatever string reaches the writer (a model's reply is text from a server's JSON too) is saved and read back
    as it was, and the events after it are saved."""
    header = Header(id="t", created="now", problem={"path": "p.py", "sha256": "x", "source": ""}, model="m",
                    backend="scripted")  # fmt: skip
    path = tmp_path / "s.jsonl"
    writer = SessionWriter(path, header)
    writer.write(ReplyEvent(turn=1, answer=LONE))
    writer.write(EvaluationEvent(turn=1, verdict=Verdict(Status.RUNTIME_ERROR, LONE)))
    writer.write(ReplyEvent(turn=2, answer="après"))
    writer.close()
    session = load_session(path)
    assert session.warning is None
    assert [getattr(e, "answer", None) for e in session.events] == [LONE, None, "après"]
    assert "après" in path.read_text(encoding="utf-8")  # readable text stays readable


# -- static checks: Python's own `math` is not a tensor ------------------------------------------------------------------

SHADOWED_MATH = {
    "rebound to torch": "import math\nmath = torch\ndef f(x):\n    return math.sqrt(x)\n",
    "imported as torch": "import torch as math\ndef f(x):\n    return math.sqrt(x)\n",
    "a parameter": "import math\ndef f(math):\n    return math.sqrt()\n",
    "a lambda's parameter": "import math\ng = lambda math: math.exp()\n",
    "a loop target": "import math\ndef f(x):\n    for math in [x]:\n        return math.log()\n",
    "written through globals()": "import math\nglobals()['ma' + 'th'] = torch\ndef f(x):\n    return math.sqrt(x)\n",
    "math.prod of tensors (a * b)": "import math\ndef f(a, b):\n    return math.prod([a, b])\n",
}


def test_math_functions_on_numbers_are_not_pytorch_compute():
    """honest_math_sqrt_scale.py: `math.sqrt(4.0)` and `math.log(1024, 2)` in __init__ were read as the tensor
    methods `.sqrt()` and `.log()`: an honest C++ kernel `rejected` under --strict."""
    warnings = run_static_checks(candidate("redteam11/honest_math_sqrt_scale.py"))
    assert "torch_compute_ops" not in [w.code for w in warnings], warnings


@pytest.mark.parametrize("how", sorted(SHADOWED_MATH))
def test_a_name_math_that_may_be_a_tensor_or_torch_is_still_read_as_compute(how):
    source = "import torch\n" + SHADOWED_MATH[how]
    assert "torch_compute_ops" in [w.code for w in run_static_checks(source)], how


def test_methods_of_the_kernels_own_struct_are_not_pytorch_compute():
    """honest_accumulator_struct.py: `acc.add(v)` and `acc.sum()` on a Kahan accumulator of its own were read as
    the tensor methods `.add()` and `.sum()`: an honest C++ kernel `rejected` under --strict (run end to end it is
    `correct` under --strict now)."""
    warnings = run_static_checks(candidate("redteam11/honest_accumulator_struct.py"))
    assert "torch_compute_ops" not in [w.code for w in warnings], warnings


OWN_STRUCT = """
struct Acc { double s = 0; void add(float v) { s += v; } float mean(int n) const { return s / n; } };
float k(const float* x, int n) { Acc acc; const Acc& r = acc; Acc* p = &acc; acc.add(x[0]); p->add(1.f); return r.mean(n); }
torch::Tensor f(torch::Tensor x) { auto o = torch::empty({1}, x.options()); return o; }
"""
# The same text with one way a tensor method gets called on a name the struct's does not settle.
TENSOR_AFTER_ALL = {
    "on another name": OWN_STRUCT.replace("return o;", "return o.add(x);"),
    "a tensor declared with the same name": OWN_STRUCT
    + "at::Tensor g(at::Tensor acc, at::Tensor v) { return acc.add(v); }",
    "a template parameter": OWN_STRUCT + "template <typename T> T g(T acc, T v) { return acc.add(v); }",
    "auto": OWN_STRUCT + "at::Tensor g(at::Tensor t) { auto acc = t; return acc.add(t); }",
    "the struct derives from Tensor": OWN_STRUCT.replace("struct Acc {", "struct Acc : at::Tensor {"),
    "the struct renamed by using": OWN_STRUCT + "using Acc = at::Tensor;",
    "the struct renamed by typedef": OWN_STRUCT + "typedef at::Tensor Acc;",
    "the receiver a macro": OWN_STRUCT + "#define acc tensor_var\n",
    "an expression": OWN_STRUCT + "at::Tensor g(at::Tensor t) { return (t).add(t); }",
    "an element": OWN_STRUCT + "at::Tensor h(std::vector<at::Tensor> acc) { return acc[0].add(acc[1]); }",
    "a qualified type of the same name": OWN_STRUCT + "at::Tensor h(ns::Acc acc) { return acc.add(1); }",
    "a template's instance": OWN_STRUCT + "at::Tensor h(Acc<decltype(&at::relu)> acc) { return acc.add(1); }",
    "a member pointing at PyTorch": OWN_STRUCT.replace(
        "double s = 0;", "at::Tensor (*add)(const at::Tensor&) = &at::relu;"
    ),
    "a member through an alias": "using F = decltype(&at::relu);\n" + OWN_STRUCT.replace("double s = 0;", "F add;"),
    "a std::function member": OWN_STRUCT.replace("double s = 0;", "std::function<void(float)> add;"),
}


def test_a_struct_of_its_own_excuses_its_own_methods_only():
    assert cpp_torch_compute(OWN_STRUCT) == []


@pytest.mark.parametrize("how", sorted(TENSOR_AFTER_ALL))
def test_a_tensor_method_beside_a_struct_of_its_own_is_still_compute(how):
    assert ".add()" in cpp_torch_compute(TENSOR_AFTER_ALL[how]), how


def test_the_struct_reading_stays_linear_in_the_text():
    import time

    text = "struct A {};\n" + " ".join(f"A a{i}; a{i}.add(1);" for i in range(60_000))  # 1.5 MB, 60,000 receivers
    started = time.perf_counter()
    assert cpp_torch_compute(text) == []
    assert time.perf_counter() - started < 20  # ~1.4 s on the 2-core machine; quadratic would be hours
