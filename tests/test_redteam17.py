"""Red team 17: the sandbox, builds and --strict's static checks (tests/candidates/redteam17/)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from kevin_tui.evaluator.host.sandbox import Limits, Sandbox
from kevin_tui.evaluator.host.scratch import read_plain
from kevin_tui.evaluator.host.workers import WorkerProcess
from kevin_tui.tui import evaluation_panel
from tests.conftest import CANDIDATES

HERE = CANDIDATES / "redteam17"
SECRET = "REDTEAM17-HOST-SECRET"
OFF = Sandbox("off", "test")


@pytest.fixture
def spawn(tmp_path, monkeypatch):
    """A WorkerProcess in `scratch` running a stand-in script instead of the real worker."""

    def make(scratch, script: str) -> WorkerProcess:
        original = __import__("subprocess").Popen

        def popen(cmd, **kwargs):
            return original([sys.executable, "-c", script], **kwargs)

        monkeypatch.setattr("kevin_tui.evaluator.host.workers.subprocess.Popen", popen)
        return WorkerProcess("candidate", scratch, {"PATH": os.environ["PATH"]}, OFF, [], Limits())

    return make


def _host_file(tmp_path):
    host = tmp_path / "host-secret.txt"
    host.write_text(SECRET + "\n")
    scratch = tmp_path / "candidate-1"
    scratch.mkdir()
    return host, scratch


def test_a_log_the_candidate_made_a_link_to_a_host_file_is_not_read_into_the_verdict(spawn, tmp_path):
    host, scratch = _host_file(tmp_path)
    worker = spawn(scratch, "import os, sys\nprint('own output', flush=True)\n")
    assert worker.proc.wait(30) == 0
    assert "own output" in worker.log_tail()  # honest: the worker's own log is read
    log = scratch / "candidate.log"
    log.unlink()
    log.symlink_to(host)  # what log_symlink_reads_host_file.py does from inside its sandbox
    assert SECRET not in worker.log_tail()
    assert SECRET not in evaluation_panel._tail(log)  # the TUI's build-phase tail of the same log
    worker.kill()


def test_a_fifo_for_a_log_does_not_block_the_host(tmp_path):
    fifo = tmp_path / "candidate.log"
    os.mkfifo(fifo)
    worker = WorkerProcess.__new__(WorkerProcess)
    worker.log_path = fifo
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(worker.log_tail()), daemon=True)
    reader.start()
    reader.join(5)
    if not got:  # unblock the reader (before the fix it waited for a writer)
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert got == [""]
    assert read_plain(fifo, 4000, tail=True) == b""


def test_a_worker_started_in_a_scratch_whose_log_is_a_link_does_not_write_through_it(spawn, tmp_path):
    host, scratch = _host_file(tmp_path)
    (scratch / "candidate.log").symlink_to(host)  # left by the candidate when a tool run reuses its scratch
    worker = spawn(scratch, "print('tool output', flush=True)\n")
    assert worker.proc.wait(30) == 0
    assert host.read_text() == SECRET + "\n"
    assert not (scratch / "candidate.log").is_symlink()
    assert "tool output" in worker.log_tail()
    worker.kill()


def test_a_worker_started_again_in_its_scratch_appends_to_its_own_log(spawn, tmp_path):
    scratch = tmp_path / "candidate-1"
    scratch.mkdir()
    (scratch / "candidate.log").write_text("first run\n")
    worker = spawn(scratch, "print('second run', flush=True)\n")
    assert worker.proc.wait(30) == 0
    assert worker.log_tail() == "first run\nsecond run\n"
    worker.kill()


def test_the_candidate_file_is_there():
    assert (HERE / "log_symlink_reads_host_file.py").is_file()


def test_a_tools_log_the_candidate_made_a_link_to_a_host_file_is_not_read(tmp_path):
    from kevin_tui.evaluator.host import ncu, sanitizer
    from kevin_tui.evaluator.host.tools import read_log

    host, scratch = _host_file(tmp_path)
    log = scratch / "tool.log"
    log.write_text("========= ERROR SUMMARY: 0 errors\n")
    assert "ERROR SUMMARY" in read_log(log, 1 << 20)  # honest: the tool's own log is read
    log.unlink()
    log.symlink_to(host)  # done by the candidate, which runs in the tool's scratch
    assert read_log(log, 1 << 20) == ""
    assert SECRET not in str(sanitizer.tool_result(log, "memcheck", None))
    assert SECRET not in str(ncu.evidence(log))


def _source_of(name: str) -> str:
    import ast

    tree = ast.parse((HERE / f"{name}.py").read_text())
    return next(n.value.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "SOURCE")


def test_cpp_that_pastes_names_with_the_preprocessor_is_a_strict_finding():
    from kevin_tui.evaluator.host.static_checks import cpp_torch_compute

    source = _source_of("cpp_calls_torch_through_python_pasted")
    assert "PyObject_Call" not in source and "ExcludeDispatchKeyGuard" not in source  # what the scan read before
    assert any("##" in found for found in cpp_torch_compute(source))
    assert cpp_torch_compute("#define J(a, b) a %:%: b\nJ(at::re, lu)(x);")  # the digraph spelling
    # a literal the plain string pattern misread ('"' opened a "string" to the next quote) hid the paste from it
    desync = 'char q = \'"\';\n#define J(a, b) a##b\nauto f = J(PyObject_, CallFunctionObjArgs);\nconst char* s = "";'
    assert any("##" in found for found in cpp_torch_compute(desync))


def test_honest_cpp_with_stringizing_macros_and_a_hash_string_is_no_finding():
    from kevin_tui.evaluator.host.static_checks import cpp_torch_compute

    honest = (
        "#include <torch/extension.h>\n"
        '#define CHECK_INPUT(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")\n'
        "// a comment with ## in it\n"
        "torch::Tensor fwd(torch::Tensor x) {\n"
        "    CHECK_INPUT(x);\n"
        '    const char* banner = "## kernel ##";\n'
        "    auto out = torch::empty_like(x);\n"
        "    return out;\n"
        "}\n"
    )
    assert cpp_torch_compute(honest) == []
