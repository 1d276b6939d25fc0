"""The compute-sanitizer gate on the CPU, up to the device: the choice on the command line, the tool's
logs (tests/sanitizer_logs, in its own format) read in the candidate's terms, a finding turning a correct
verdict incorrect, and the pass's plumbing in the real sandbox under a stand-in that behaves like
compute-sanitizer from the outside. scripts/gpu-check.sh runs the real tool on the planted kernels in
tests/candidates/sanitizer/ (tests/test_gpu.py) when a GPU is lent.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from kevin_tui.arguments import build_parser, eval_options
from kevin_tui.config import Settings
from kevin_tui.evaluator import EvalOptions, Evaluator, Status, Verdict
from kevin_tui.evaluator.host import sanitizer
from kevin_tui.evaluator.report import evidence_lines
from tests.conftest import RELU, candidate, sandbox_here

LOGS = Path(__file__).parent / "sanitizer_logs"


def read(name: str, tool: str) -> dict:
    return sanitizer.tool_result(LOGS / name, tool, None)


@pytest.mark.parametrize(
    ("log", "tool", "what", "kernel", "line"),
    [
        ("memcheck_oob.log", "memcheck", "Invalid __global__ read of size 4 bytes", "relu_oob_kernel(", 9),
        ("racecheck_hazard.log", "racecheck", "Race reported between Write access", "relu_race_kernel(", 8),
        ("initcheck_uninit.log", "initcheck", "Uninitialized __global__ memory read of size 4 bytes",
         "relu_uninit_kernel(", 8),
        ("synccheck_divergent.log", "synccheck", "Barrier error detected. Divergent thread(s) in block",
         "reduce_kernel(", 15),
    ],
)  # fmt: skip
def test_each_tools_first_finding_is_read_in_the_candidates_terms(log, tool, what, kernel, line):
    found = read(log, tool)["findings"]
    assert found, f"{log}: no finding read"
    first = sanitizer.Finding(**found[0])
    assert first.tool == tool and first.what == what
    assert first.kernel.startswith(kernel) and first.line == line and first.file.endswith("/cuda.cu")
    text = first.describe()
    assert text.startswith(f"compute-sanitizer {tool}: {what} in {kernel}") and f"at cuda.cu:{line}" in text


def test_the_details_a_kernel_engineer_needs_come_with_the_finding():
    memcheck = sanitizer.Finding(**read("memcheck_oob.log", "memcheck")["findings"][0])
    assert "by thread (255,0,0) in block (1023,0,0)" in memcheck.detail and "0 bytes after" in memcheck.detail
    race = sanitizer.Finding(**read("racecheck_hazard.log", "racecheck")["findings"][0])
    assert "and Read access at relu_race_kernel" in race.detail and "[7168 hazards]" in race.detail


def test_racechecks_own_warnings_and_a_clean_run_are_no_finding():
    assert read("racecheck_benign.log", "racecheck") == {"findings": []}  # the tool's "Warning:", not an error
    assert read("clean.log", "memcheck") == {"findings": []}
    racecheck = read("racecheck_hazard.log", "racecheck")["findings"]
    assert len(racecheck) == 1  # the error, not the warning printed before it


def test_without_lineinfo_the_kernel_is_named_and_the_line_said_missing():
    found = read("memcheck_nolineinfo.log", "memcheck")["findings"]
    assert len(found) == 2 and found[0]["kernel"] == "relu_oob_kernel(const float *, float *, long)"
    assert found[0]["line"] is None
    assert "(no line: built without -lineinfo)" in sanitizer.Finding(**found[0]).describe()


def test_a_finding_in_a_format_never_seen_still_fails_the_gate(tmp_path):
    found = read("unknown_finding.log", "initcheck")["findings"]
    assert found and found[0]["what"] == "Some finding in a format this parser has never seen"
    counted = tmp_path / "counted.log"  # only the tool's count survives: still a finding, in its words
    counted.write_text(
        "========= COMPUTE-SANITIZER\n=========     odd indented line\n========= ERROR SUMMARY: 3 errors\n"
    )
    only = sanitizer.tool_result(counted, "memcheck", None)["findings"]
    assert len(only) == 1 and only[0]["what"] == "3 error(s) reported" and "odd indented line" in only[0]["detail"]


def test_a_log_with_no_summary_is_not_called_clean(tmp_path):
    entry = sanitizer.tool_result(tmp_path / "missing.log", "memcheck", "the worker was killed by SIGKILL")
    assert entry["findings"] == [] and "no summary" in entry["skipped"] and "SIGKILL" in entry["failure"]
    assert "did not finish: memcheck" in sanitizer.summary({"tools": {"memcheck": entry}})


def test_a_finding_makes_a_correct_verdict_incorrect_with_the_tools_words():
    verdict = Verdict(Status.CORRECT, "correct", speedup=2.0, speedup_compile=1.5, speedup_interval=(1.8, 2.2))
    result = {"tools": {"memcheck": read("clean.log", "memcheck"), "racecheck": read("racecheck_hazard.log",
                                                                                      "racecheck")}}  # fmt: skip
    sanitizer.apply(verdict, result)
    assert verdict.status is Status.INCORRECT and verdict.details["unsanitized_status"] == "correct"
    assert verdict.message.startswith("compute-sanitizer racecheck: Race reported between Write access in relu_race")
    assert verdict.speedup is None and verdict.speedup_interval is None
    assert verdict.evidence["sanitizer"] is result
    assert evidence_lines(verdict.evidence) == [f"  {verdict.message}"]
    clean = Verdict(Status.CORRECT, "correct", speedup=2.0)
    sanitizer.apply(clean, {"tools": {t: read("clean.log", t) for t in sanitizer.TOOLS}})
    assert clean.status is Status.CORRECT and clean.speedup == 2.0
    assert sanitizer.summary(clean.evidence["sanitizer"]) == (
        "compute-sanitizer: clean under memcheck, racecheck, initcheck, synccheck"
    )


@pytest.mark.parametrize(
    ("given", "stored", "every_verdict", "at_accept"),
    [
        (None, "accept", (), sanitizer.TOOLS),  # the default: every tool, at accept time only
        ("off", "off", (), ()),
        ("all", ",".join(sanitizer.TOOLS), sanitizer.TOOLS, sanitizer.TOOLS),
        ("memcheck, racecheck,memcheck", "memcheck,racecheck", ("memcheck", "racecheck"), ("memcheck", "racecheck")),
    ],
)
def test_the_command_line_choice(given, stored, every_verdict, at_accept):
    argv = ["eval", str(RELU), "candidate.py"] + ([] if given is None else ["--sanitize", given])
    options = eval_options(build_parser().parse_args(argv), Settings())
    assert options.sanitize == stored
    assert sanitizer.tools_for(options.sanitize, at_accept=False) == every_verdict
    assert sanitizer.tools_for(options.sanitize, at_accept=True) == at_accept
    assert EvalOptions().sanitize == "off"  # a library caller asks for it


def test_an_unknown_tool_is_refused_with_the_choices(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["eval", str(RELU), "c.py", "--sanitize", "memcheck,leakcheck"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "unknown sanitizer tool leakcheck" in error and "memcheck, racecheck, initcheck, synccheck" in error


def test_the_tool_is_found_on_path_or_in_the_toolkit(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    assert sanitizer.find_sanitizer() is None
    tool = tmp_path / "no-cuda" / "compute-sanitizer" / "compute-sanitizer"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert sanitizer.find_sanitizer() == str(tool)
    prefix = sanitizer.command_prefix(str(tool), "racecheck", tmp_path / "log")
    assert prefix[:3] == [str(tool), "--tool", "racecheck"] and prefix[-2:] == ["--log-file", str(tmp_path / "log")]


def test_on_the_cpu_the_evaluator_says_why_it_does_not_sanitize(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, cache_dir=build_cache, sanitize="memcheck")
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        assert evaluator.sanitize(candidate("relu_torch.py"), ["memcheck"]) == {
            "skipped": "compute-sanitizer checks CUDA kernels; the device here is cpu"
        }
        verdict = evaluator.evaluate(candidate("relu_torch.py"))
    assert verdict.status is Status.CORRECT  # asked for: the reason is shown with the verdict
    assert evidence_lines(verdict.evidence) == ["  not sanitized: compute-sanitizer checks CUDA kernels; the device "
                                                "here is cpu"]  # fmt: skip


# Stands in for compute-sanitizer: checks what the real tool needs from the sandbox (loopback up, the
# worker's environment with the caching allocator off), runs the command after its options keeping the
# worker's descriptors, then writes a log in the tool's format to --log-file.
STAND_IN = """#!{python}
import os, socket, sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
command = args[args.index("--log-file") + 2:]
problems = []
try:
    with socket.socket() as server, socket.socket() as client:
        server.bind(("127.0.0.1", 0)); server.listen(1); client.connect(server.getsockname())
except OSError as exc:
    problems.append(f"loopback: {{exc}}")
if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") != "1":
    problems.append("the caching allocator is on")
pid = os.fork()
if pid == 0:
    os.execv(command[0], command)
_, status = os.waitpid(pid, 0)
with open(log, "w") as f:
    f.write("".join(f"==ERROR== {{p}}\\n" for p in problems) or {text!r})
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("sandbox", ["bwrap", "unshare"])
def test_the_gate_runs_one_forward_under_the_tool_in_the_sandbox(tmp_path, build_cache, relu_problem, sandbox):
    tool = tmp_path / "cuda" / "compute-sanitizer"
    tool.parent.mkdir()
    tool.write_text(STAND_IN.format(python=sys.executable, text=(LOGS / "memcheck_oob.log").read_text()))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    options = EvalOptions(device="cpu", timing=False, sandbox=sandbox_here(sandbox), cache_dir=build_cache)
    source = candidate("relu_cpp.py")
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate(source)
        assert verdict.status is Status.CORRECT, verdict.message
        inputs = evaluator.reference_sample()
        result = sanitizer.sanitize_pass(evaluator.tool_run, str(tool), ("memcheck", "racecheck"), inputs, source)
    assert list(result["tools"]) == ["memcheck"], result  # the first finding decides: racecheck never ran
    first = sanitizer.first_finding(result)
    assert first is not None and first.kernel.startswith("relu_oob_kernel"), result
    sanitizer.apply(verdict, result)
    assert verdict.status is Status.INCORRECT and "memcheck: Invalid __global__ read" in verdict.message


def test_a_worker_that_dies_under_the_tool_is_no_clean_bill(tmp_path, build_cache, relu_problem):
    tool = tmp_path / "compute-sanitizer"
    tool.write_text("#!/bin/sh\necho '========= Internal Sanitizer Error: the device is not supported' >&2\nexit 1\n")
    tool.chmod(0o755)
    options = EvalOptions(device="cpu", timing=False, cache_dir=build_cache)
    source = candidate("relu_cpp.py")
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        assert evaluator.evaluate(source).status is Status.CORRECT
        inputs = evaluator.reference_sample()
        result = sanitizer.sanitize_pass(evaluator.tool_run, str(tool), ("memcheck",), inputs, source)
    entry = result["tools"]["memcheck"]
    assert entry["findings"] == [] and entry["failure"] and "no summary" in entry["skipped"]
    assert "did not finish: memcheck" in sanitizer.summary(result)
