"""The host's view of workers: environment, sandbox choice, kills, and a protocol that refuses garbage."""

import os
import shutil
import signal
import sys
import time

import pytest

from kevin_tui.evaluator.host import sandbox as sandboxes
from kevin_tui.evaluator.host.sandbox import Limits, Sandbox, choose, worker_env
from kevin_tui.evaluator.host.workers import WorkerGone, WorkerProcess, WorkerTimeout, describe_exit
from kevin_tui.evaluator.protocol import ProtocolViolation, parse_event


def test_worker_env_drops_credentials_and_keeps_the_toolchain():
    base = {
        "PATH": "/usr/bin", "HOME": "/root", "OPENAI_API_KEY": "x", "HF_TOKEN": "x", "AWS_SECRET_ACCESS_KEY": "x",
        "DB_PASSWORD": "x", "GITHUB_PAT": "x", "CUDA_HOME": "/opt/cuda", "TORCH_CUDA_ARCH_LIST": "8.0",
        "TORCH_HUB_TOKEN": "x", "LC_ALL": "C", "RANDOM_THING": "x", "SSH_AUTH_SOCK": "/tmp/agent",
        "KEVIN_TUI_PCH_MAX_GB": "1.5",
    }  # fmt: skip
    env = worker_env(base, gpu_visible=True)
    assert env["PATH"] == "/usr/bin" and env["CUDA_HOME"] == "/opt/cuda" and env["LC_ALL"] == "C"
    assert env["KEVIN_TUI_PCH_MAX_GB"] == "1.5"  # the builder keeps the precompiled headers under the user's cap
    assert env["TORCH_CUDA_ARCH_LIST"] == "8.0"
    assert env["HOME"] == sandboxes.SANDBOX_HOME and env["TMPDIR"] == "/tmp"  # never the user's HOME
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "GITHUB_PAT",
                 "TORCH_HUB_TOKEN", "RANDOM_THING", "SSH_AUTH_SOCK"):  # fmt: skip
        assert name not in env, name


def test_worker_env_sets_an_arch_when_no_gpu_is_visible():
    assert worker_env({"PATH": "/usr/bin"}, gpu_visible=False)["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert "TORCH_CUDA_ARCH_LIST" not in worker_env({"PATH": "/usr/bin"}, gpu_visible=True)


def test_describe_exit():
    assert describe_exit(-signal.SIGSEGV) == "was killed by SIGSEGV"
    assert describe_exit(0) == "exited with code 0"


def test_the_best_sandbox_is_chosen_and_off_says_why(monkeypatch):
    assert choose("auto").kind == "unshare"  # the jail, whose workers start warm, where namespaces can be made
    has_bwrap = shutil.which("bwrap") is not None  # CI installs bubblewrap; the GPU image has none
    if has_bwrap:
        assert choose("bwrap").kind == "bwrap"
    off = choose("off")
    assert off.kind == "off" and off.describe() == "off (--sandbox off)"
    works = sandboxes._works
    monkeypatch.setattr(sandboxes, "_works", lambda kind: "no user namespaces" if kind == "unshare" else works(kind))
    assert choose("auto").kind == ("bwrap" if has_bwrap else "off")  # bwrap's setuid or AppArmor profile may
    monkeypatch.setattr(sandboxes, "_works", lambda kind: f"{kind} is not installed")
    fallback = choose("auto")
    assert fallback.kind == "off" and "bwrap is not installed" in fallback.describe()
    with pytest.raises(sandboxes.SandboxUnavailable, match="--sandbox required"):
        choose("required")


def test_the_project_and_home_are_not_bound_into_a_sandbox():
    paths = {b.path for b in sandboxes.system_binds()}
    root = sandboxes.package_root()
    assert str(root / "kevin_tui") in paths and str(root) not in paths
    assert os.path.expanduser("~") not in paths


OFF = Sandbox("off", "test")


@pytest.fixture
def spawn(tmp_path, monkeypatch):
    """A WorkerProcess running a stand-in script (given the same pipes) instead of the real worker."""

    def make(script: str, sandbox: Sandbox = OFF) -> WorkerProcess:
        original = __import__("subprocess").Popen

        def popen(cmd, **kwargs):
            fds = [str(fd) for fd in kwargs["pass_fds"]]
            return original([sys.executable, "-c", script, *fds], **kwargs)

        monkeypatch.setattr("kevin_tui.evaluator.host.workers.subprocess.Popen", popen)
        return WorkerProcess("candidate", tmp_path, {"PATH": os.environ["PATH"]}, sandbox, [], Limits())

    return make


EMIT = "import json, os, sys, time\nout = os.fdopen(int(sys.argv[2]), 'w', buffering=1)\n"


def test_kill_takes_down_grandchildren_that_ignore_sigterm(spawn, tmp_path):
    pid_file = tmp_path / "grandchild"
    worker = spawn(
        "import signal, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "time.sleep(600)\n"
    )
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    worker.kill()  # returns at once; the group is made sure of on a thread
    worker.kill()  # a second kill does nothing
    assert worker.reaped(30) and worker.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(grandchild, 0)


def test_events_are_stamped_and_timeouts_and_death_are_told_apart(spawn):
    worker = spawn(EMIT + "out.write(json.dumps({'event': 'loaded'}) + '\\n'); time.sleep(600)")
    arrived = worker.arrival(10)
    assert arrived.event["event"] == "loaded" and arrived.at <= time.perf_counter()
    with pytest.raises(WorkerTimeout):
        worker.event(0.2)
    worker.kill()
    with pytest.raises(WorkerGone, match=r"SIGTERM|SIGKILL"):
        worker.event(5)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not an event object"),
        ('{"event": "final", "status": "correct", "message": "", "details": {}}', "status"),
        ('{"event": "checked", "outputs_path": "/tmp/x"}', "unknown event"),
        (
            '{"event": "round_done", "round": 1, "samples_ms": [-1.0], "synced_ms": null, "path": null}',
            "samples_ms",
        ),
        (
            '{"event": "round_done", "round": 1, "samples_ms": [1e309], "synced_ms": null, "path": null}',
            "not JSON|samples_ms",
        ),
        ('{"event": "loaded", "extra": 1}', "unexpected fields"),
        ("[" * 100_000, "not JSON"),
    ],
)
def test_anything_off_protocol_is_a_violation_not_a_crash(line, why):
    with pytest.raises(ProtocolViolation, match=why):
        parse_event("candidate", line.encode())


def test_a_worker_writing_garbage_is_reported_as_a_violation(spawn):
    worker = spawn(EMIT + 'out.write(\'{"event": "final", "status": "correct"}\\n\'); time.sleep(600)')
    with pytest.raises(ProtocolViolation):
        worker.event(10)
    worker.kill()


def test_a_flood_of_bytes_without_a_newline_is_refused(spawn):
    worker = spawn(EMIT + "out.write('x' * (3 << 20)); out.flush(); time.sleep(600)")
    with pytest.raises(ProtocolViolation, match="bytes"):
        worker.event(20)
    worker.kill()


def test_a_worker_starts_without_loading_the_hosts_side():
    """What every worker imports before its role (the jail, the supervisor, the channel) loads none of the
    host's modules: importing the kevin_tui.evaluator package once cost each worker start 0.13 s."""
    import subprocess

    code = ("import sys, kevin_tui.evaluator.worker.main, kevin_tui.evaluator.worker.jail, "
            "kevin_tui.evaluator.worker.supervisor, kevin_tui.evaluator.worker.channel; "
            "print(sorted(m for m in sys.modules if '.host' in m))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
