"""Real escape attempts against the real sandbox (bwrap and the unshare fallback), no mocks.

Each candidate computes ReLU correctly when its attack fails and returns zeros when it succeeds, so
`correct` means "found nothing". Secrets, a fake HOME and a loopback server are planted by the tests;
after each verdict the caller is alive, nothing planted was read or changed, and no process of the
candidate is left.
"""

from __future__ import annotations

import shutil
import socket
import threading
from pathlib import Path

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, PROBLEMS, RELU, gone_within, sandbox_here

ESCAPES = CANDIDATES / "escape"
SECRET = "kevin-planted-secret"
PORT = 47999


class Listener:
    """A loopback server that records whether anyone reached it."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", PORT), reuse_port=True)
        self.server.settimeout(0.2)
        self.reached = False
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.reached = True
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.server.close()


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def planted(request, tmp_path_factory, build_cache):
    """An evaluator in the given sandbox, with secrets planted in the caller's environment and HOME."""
    monkeypatch = pytest.MonkeyPatch()
    home = tmp_path_factory.mktemp("home")
    (home / ".ssh").mkdir()
    (home / ".netrc").write_text(f"machine example.com login me password {SECRET}\n")
    (home / ".ssh" / "id_ed25519").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KEVIN_TEST_PLANTED_KEY", SECRET)
    project = tmp_path_factory.mktemp("project")
    shutil.copy(RELU, project / "relu.py")
    (project / "planted.txt").write_text("untouched")
    sandbox = sandbox_here(request.param)
    options = EvalOptions(device="cpu", timing=False, timeout_s=60, sandbox=sandbox, memory_limit=2 << 30,
                          cache_dir=build_cache)  # fmt: skip
    listener = Listener()
    with Evaluator(load_problem(project / "relu.py"), options, prespawn=False) as evaluator:
        evaluator.limits.processes = 256
        yield evaluator, project, listener
    listener.close()
    monkeypatch.undo()


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("read_caller_environ.py", Status.CORRECT),
        ("read_home_secrets.py", Status.CORRECT),
        ("kill_the_caller.py", Status.CORRECT),
        ("phone_home.py", Status.CORRECT),
        ("write_outside.py", Status.CORRECT),
        ("daemon.py", {Status.CORRECT, Status.REJECTED}),  # under unshare the worker adopts the orphan and says so
        ("fork_bomb.py", Status.RUNTIME_ERROR),
        ("allocate_50gb.py", Status.RUNTIME_ERROR),
    ],
)
def test_an_escape_attempt_gets_a_clean_verdict_and_finds_nothing(planted, name, status):
    evaluator, project, listener = planted
    verdict = evaluator.evaluate((ESCAPES / name).read_text())
    allowed = status if isinstance(status, set) else {status}
    assert verdict.status in allowed, f"{name}: {verdict.status} {verdict.message}"
    assert verdict.sandbox == evaluator.sandbox.kind
    assert not listener.reached, "the candidate reached a loopback server"
    assert (project / "planted.txt").read_text() == "untouched"
    assert sorted(p.name for p in project.iterdir()) == ["planted.txt", "relu.py"]
    assert gone_within("kevin-escape-daemon", 1.0), "a process of the candidate outlived its verdict"
    assert not any(Path(evaluator.options.cache_dir, "builds").glob("kevin-escape*"))
    if status == Status.RUNTIME_ERROR:
        assert "no process limit" not in verdict.message and "Traceback" not in verdict.message


def test_the_evaluator_still_works_after_every_attack(planted):
    evaluator, _, _ = planted
    assert evaluator.evaluate((CANDIDATES / "relu_torch.py").read_text()).status is Status.CORRECT


def test_the_reference_worker_is_sandboxed_too(planted):
    evaluator, _, _ = planted
    with Evaluator(load_problem(PROBLEMS / "nosy_reference.py"), evaluator.options, prespawn=False) as nosy:
        assert nosy.reference_ready()["device"] == "cpu"  # it would raise if it saw the secrets


def test_without_a_sandbox_every_verdict_says_so(build_cache):
    options = EvalOptions(device="cpu", timing=False, sandbox="off", cache_dir=build_cache)
    with Evaluator(load_problem(RELU), options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate((CANDIDATES / "relu_torch.py").read_text())
        assert evaluator.environment["sandbox"] == "off (--sandbox off)"
    assert verdict.sandbox == "off (--sandbox off)"
