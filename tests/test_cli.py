"""`kevin-tui eval` as a user runs it: a real subprocess, exit codes, JSON and the text report (accept and
undo by name: test_kernelbench's eval by name)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import CANDIDATES, PROBLEMS, RELU, has_cuda_device

CONTRACT_KEYS = {"status", "message", "details", "speedup", "speedup_compile", "candidate_ms", "reference_ms",
                 "checks", "warnings", "device"}  # fmt: skip


def kevin(*args: str, cache=None) -> subprocess.CompletedProcess:
    env_args = ["--cache-dir", str(cache)] if cache else []
    return subprocess.run(
        [sys.executable, "-m", "kevin_tui", "eval", *args, *env_args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_correct_json_has_the_contract_and_exit_0(build_cache):
    result = kevin(str(RELU), str(CANDIDATES / "relu_torch.py"), "--device", "cpu", "--json",
                   "--timing-trials", "20", cache=build_cache)  # fmt: skip
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict.keys() >= CONTRACT_KEYS
    assert verdict["status"] == "correct" and verdict["speedup"] > 0 and verdict["device"] == "cpu"
    assert verdict["warnings"][0]["code"] == "no_custom_kernel"
    assert all({"name", "passed", "detail"} <= c.keys() for c in verdict["checks"])


@pytest.mark.parametrize("problem", ["missing_get_inputs.py", "reference_raises.py", "syntax_error.py"])
def test_unusable_problem_exits_2_naming_the_file_without_traceback(problem, build_cache):
    result = kevin(str(PROBLEMS / problem), str(CANDIDATES / "relu_torch.py"), "--device", "cpu",
                   cache=build_cache)  # fmt: skip
    assert result.returncode == 2
    assert problem in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_missing_problem_file_exits_2():
    result = kevin("/nonexistent/problem.py", str(CANDIDATES / "relu_torch.py"))
    assert result.returncode == 2 and "no such file" in result.stderr


@pytest.mark.skipif(has_cuda_device(), reason="checks the no-GPU message")
def test_cuda_device_without_gpu_exits_4(build_cache):
    result = kevin(str(RELU), str(CANDIDATES / "relu_torch.py"), "--device", "cuda", cache=build_cache)
    assert result.returncode == 4
    assert "cannot evaluate here" in result.stderr and "no CUDA device" in result.stderr


def test_help_lists_the_options():
    result = subprocess.run([sys.executable, "-m", "kevin_tui", "eval", "--help"], capture_output=True, text=True)
    for option in ("--device", "--timeout", "--trials", "--json", "--strict", "exit codes"):
        assert option in result.stdout


def test_incorrect_text_report_exit_1_and_never_accepted(tmp_path, build_cache):
    """One run for both (each run is a kevin-tui process and a real evaluation): the text report of an
    incorrect candidate, and `--accept` refusing it."""
    problem = tmp_path / "relu.py"
    problem.write_text(RELU.read_text())
    result = kevin(str(problem), str(CANDIDATES / "slightly_wrong.py"), "--device", "cpu", "--accept", "--no-git",
                   cache=build_cache)  # fmt: skip
    assert result.returncode == 1
    assert result.stdout.startswith("INCORRECT: wrong output in trial 1")
    assert "max_abs_error=" in result.stdout and "FAILED output trial 1" in result.stdout
    assert "not accepted: the verdict is incorrect" in result.stdout
    assert not (tmp_path / "relu_kernel.py").exists()


def test_a_slower_kernel_is_accepted_only_when_asked_as_in_the_app(tmp_path, build_cache):
    """`eval --accept` goes through the driver's one accept decision: a kernel slower than eager is
    a question, answered on the command line by --accept-slower."""
    problem = tmp_path / "relu.py"
    problem.write_text(RELU.read_text())
    # a row at a time in Python: slower than eager on any machine, under any load (relu_cpp is not always)
    slow = ["--device", "cpu", "--json", "--timing-trials", "20", "--accept", "--no-git"]
    refused = kevin(str(problem), str(CANDIDATES / "relu_slow.py"), *slow, cache=build_cache)
    verdict = json.loads(refused.stdout)
    assert verdict["status"] == "correct" and verdict["speedup"] < 1, verdict["message"]
    assert refused.returncode == 1 and not (tmp_path / "relu_kernel.py").exists()
    assert verdict["accepted"]["error"].startswith("not accepted: relu_slow.py is slower than the reference")
    assert "--accept-slower commits it anyway" in verdict["accepted"]["error"]
    allowed = kevin(str(problem), str(CANDIDATES / "relu_slow.py"), *slow, "--accept-slower", cache=build_cache)
    assert allowed.returncode == 0, allowed.stdout
    assert json.loads(allowed.stdout)["accepted"]["path"] == str(tmp_path / "relu_kernel.py")
