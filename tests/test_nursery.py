"""Warm worker starts (host/nursery.py, worker/nursery.py): the same jail, the same verdicts, no fresh import.

Real evaluations under the `unshare` sandbox; the nursery's `spawn` is wrapped only to see which workers it
made. Each candidate computes ReLU when what it checks from inside holds, and zeros when it does not.
"""

from __future__ import annotations

import shutil
import signal
import time

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host import nursery as nurseries
from kevin_tui.evaluator.host.nursery import Nursery, Spawned
from kevin_tui.evaluator.host.sandbox import Limits, Sandbox, package_root, worker_env
from kevin_tui.evaluator.host.workers import WorkerProcess, spares_paused
from kevin_tui.problem import load_problem
from tests.conftest import RELU

RELU_OR_ZEROS = """
import os
import torch
import torch.nn as nn

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].split()
    return None

JAILED = (status("CapEff") == ["0000000000000000"] and status("NoNewPrivs") == ["1"] and status("Seccomp") == ["2"]
          and os.getpid() < 10 and not os.path.exists({project!r}))

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) if JAILED else torch.zeros_like(x)
"""


@pytest.fixture
def made(monkeypatch):
    """The roles of the workers the nursery made in this test (the real spawn runs)."""
    roles: list[str] = []
    real = Nursery.spawn

    def spawn(self, role, *args, **kwargs):
        child = real(self, role, *args, **kwargs)
        roles.append(role)
        return child

    monkeypatch.setattr(Nursery, "spawn", spawn)
    return roles


@pytest.fixture
def project(tmp_path):
    shutil.copy(RELU, tmp_path / "relu.py")
    return tmp_path


def options(build_cache, **overrides) -> EvalOptions:
    return EvalOptions(device="cpu", timing=False, shapes="off", sandbox="unshare", cache_dir=build_cache, **overrides)


def test_workers_are_forked_warm_into_the_same_locked_jail(project, build_cache, made):
    source = RELU_OR_ZEROS.format(project=str(project))
    with Evaluator(load_problem(project / "relu.py"), options(build_cache), prespawn=False) as evaluator:
        verdict = evaluator.evaluate(source)
        assert verdict.status == Status.CORRECT, verdict.message  # locked, filtered, own PID namespace, no project
        started = time.perf_counter()
        again = evaluator.evaluate(source)
        warm_s = time.perf_counter() - started
    assert again.status == Status.CORRECT and verdict.sandbox == "unshare"
    assert made.count("reference") == 1 and made.count("candidate") >= 2, made
    assert warm_s < 30  # not a timing test: a second evaluation that waited on a dead nursery would hang to 120 s


def test_cold_starts_when_switched_off_give_the_same_verdict(project, build_cache, made, monkeypatch):
    monkeypatch.setenv(nurseries.DISABLE, "1")
    source = RELU_OR_ZEROS.format(project=str(project))
    with Evaluator(load_problem(project / "relu.py"), options(build_cache), prespawn=False) as evaluator:
        assert evaluator.evaluate(source).status == Status.CORRECT
    assert made == []


def test_a_worker_killed_or_exiting_reports_its_status_through_the_nursery(tmp_path):
    worker = WorkerProcess("candidate", tmp_path / "a", worker_env(), Sandbox("unshare"), [], Limits())
    assert isinstance(worker.proc, Spawned)
    worker.wait_started(120)
    worker.send({"cmd": "exit"})
    assert worker.returncode() == 0
    worker.kill()
    assert worker.reaped(30)

    killed = WorkerProcess("candidate", tmp_path / "b", worker_env(), Sandbox("unshare"), [], Limits())
    killed.wait_started(120)
    killed.kill()
    assert killed.reaped(30)
    assert killed.returncode() == -signal.SIGKILL


def test_a_dead_nursery_means_cold_starts_not_a_lost_worker(tmp_path, monkeypatch):
    monkeypatch.setattr(nurseries, "_nurseries", {})
    first = WorkerProcess("candidate", tmp_path / "a", worker_env(), Sandbox("unshare"), [], Limits())
    assert isinstance(first.proc, Spawned)
    first.wait_started(120)
    (nursery,) = nurseries._nurseries.values()
    nursery.proc.kill()
    nursery.proc.wait()
    first.kill()  # its exit status went with the nursery: it is still killed and reaped
    assert first.reaped(30) and first.returncode() is not None
    second = WorkerProcess("candidate", tmp_path / "b", worker_env(), Sandbox("unshare"), [], Limits())
    assert not isinstance(second.proc, Spawned)
    second.wait_started(120)
    assert second.started.is_set() and second.alive()
    assert "started cold (the nursery" in second.log_tail()
    second.kill()
    assert second.reaped(30)
    nurseries.close_all()


def test_a_spawn_answered_too_late_leaves_the_cold_worker_pipes_of_its_own(tmp_path, monkeypatch):
    """The host stops waiting for the nursery's answer (here at once) and starts the worker cold, but the nursery
    still forks one: it must get nothing of the cold worker's. With the same pipes, that late fork lived on beside
    it, reading its commands; with pipes of its own, the late one sees its pipes close and exits."""
    monkeypatch.setattr(nurseries, "_nurseries", {})
    monkeypatch.setattr(nurseries, "SPAWN_TIMEOUT_S", 0.0)
    worker = WorkerProcess("candidate", tmp_path / "a", worker_env(), Sandbox("unshare"), [], Limits())
    assert not isinstance(worker.proc, Spawned)
    assert "started cold (the nursery did not answer)" in worker.log_tail()
    (nursery,) = nurseries._nurseries.values()
    deadline = time.monotonic() + 60
    while nursery._abandoned and time.monotonic() < deadline:  # its exit, reported, clears it
        time.sleep(0.05)
    assert not nursery._abandoned, "the late fork is still alive"
    worker.wait_started(120)
    worker.send({"cmd": "exit"})
    assert worker.returncode() == 0
    worker.kill()
    assert worker.reaped(30)
    nurseries.close_all()


def test_a_nursery_still_importing_waits_while_a_kernel_is_timed(monkeypatch):
    monkeypatch.setattr(nurseries, "_nurseries", {})
    env = {**worker_env(), "PYTHONPATH": str(package_root())}
    with spares_paused():
        nursery = nurseries.nursery_for(env)
        assert nursery is not None
        deadline = time.monotonic() + 10
        while process_state(nursery.proc.pid) != "T":  # stopped, before it could import anything much
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not nursery._ready.wait(2)
    assert nursery.usable()  # the timing is over: it imports and is ready
    nurseries.close_all()


def process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]
