import os
import signal
import sys
import time

import pytest

from kevin_tui.evaluator.sandbox import WorkerGone, WorkerProcess, WorkerTimeout, describe_exit, worker_env


def test_worker_env_drops_credentials_and_keeps_the_toolchain():
    base = {
        "PATH": "/usr/bin", "HOME": "/root", "OPENAI_API_KEY": "x", "HF_TOKEN": "x", "AWS_SECRET_ACCESS_KEY": "x",
        "DB_PASSWORD": "x", "GITHUB_PAT": "x", "CUDA_HOME": "/opt/cuda", "TORCH_CUDA_ARCH_LIST": "8.0",
        "TORCH_HUB_TOKEN": "x", "LC_ALL": "C", "RANDOM_THING": "x", "SSH_AUTH_SOCK": "/tmp/agent",
    }  # fmt: skip
    env = worker_env(base, gpu_visible=True)
    assert env["PATH"] == "/usr/bin" and env["CUDA_HOME"] == "/opt/cuda" and env["LC_ALL"] == "C"
    assert env["TORCH_CUDA_ARCH_LIST"] == "8.0"
    for name in (
        "OPENAI_API_KEY",
        "HF_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "GITHUB_PAT",
        "TORCH_HUB_TOKEN",
        "RANDOM_THING",
        "SSH_AUTH_SOCK",
    ):
        assert name not in env, name


def test_worker_env_sets_an_arch_when_no_gpu_is_visible():
    assert worker_env({"PATH": "/usr/bin"}, gpu_visible=False)["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert "TORCH_CUDA_ARCH_LIST" not in worker_env({"PATH": "/usr/bin"}, gpu_visible=True)


def test_describe_exit():
    assert describe_exit(-signal.SIGSEGV) == "was killed by SIGSEGV"
    assert describe_exit(0) == "exited with code 0"


@pytest.fixture
def spawn(tmp_path, monkeypatch):
    def make(script: str) -> WorkerProcess:
        original = __import__("subprocess").Popen

        def popen(cmd, **kwargs):
            return original([sys.executable, "-c", script], **kwargs)

        monkeypatch.setattr("kevin_tui.evaluator.sandbox.subprocess.Popen", popen)
        return WorkerProcess("candidate", {}, tmp_path, tmp_path / "log", {"PATH": os.environ["PATH"]})

    return make


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
    worker.kill()
    assert worker.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(grandchild, 0)


def test_events_timeout_and_death(spawn):
    worker = spawn("import json, sys, time; print(json.dumps({'event': 'hello'}), flush=True); time.sleep(600)")
    assert worker.event(10)["event"] == "hello"
    with pytest.raises(WorkerTimeout):
        worker.event(0.2)
    worker.kill()
    with pytest.raises(WorkerGone, match=r"SIGTERM|SIGKILL"):
        worker.event(5)


def test_garbage_on_the_protocol_is_ignored(spawn):
    worker = spawn("import sys; print('not json'); print('[1, 2]'); print('{\"event\": \"ok\"}'); sys.stdout.flush()")
    assert worker.event(10)["event"] == "ok"
    with pytest.raises(WorkerGone, match="exited with code 0"):
        worker.event(10)
