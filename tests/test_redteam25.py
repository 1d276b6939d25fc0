"""Red team 25: the host's files in a candidate's scratch, the clock and the build cache.

Real evaluations of ReLU on the CPU in the default sandbox. Each attacking candidate computes ReLU, so the verdict
it should get is decided by the host's handling alone; each honest one must stay CORRECT.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import shutil
import threading
import time
from pathlib import Path

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host.candidate_run import speed_figures
from kevin_tui.evaluator.host.reference import ReferenceWorker
from kevin_tui.evaluator.host.scratch import InTheWay, WorkerFiles
from kevin_tui.evaluator.host.timing import Round, Side
from kevin_tui.evaluator.host.workers import MAX_QUEUED_BYTES, MAX_QUEUED_EVENTS, Queued, WorkerProcess
from kevin_tui.evaluator.protocol import ProtocolViolation
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, RELU

HERE = CANDIDATES / "redteam25"


@pytest.fixture(scope="module")
def judged(tmp_path_factory, build_cache):
    project = tmp_path_factory.mktemp("project")
    shutil.copy(RELU, project / "relu.py")
    options = EvalOptions(device="cpu", timing=False, shapes="off", timeout_s=120, cache_dir=build_cache)
    with Evaluator(load_problem(project / "relu.py"), options, prespawn=False) as evaluator:
        yield evaluator


def test_a_directory_where_the_host_moves_an_input_is_a_rejection(judged):
    """The host moves each trial's inputs into the candidate's scratch under a name it knows (`in-1.kt`); what the
    candidate put there is its doing: a protocol violation, not an exception out of the evaluation."""
    verdict = judged.evaluate((HERE / "directory_where_its_input_goes.py").read_text())
    assert verdict.status == Status.REJECTED, verdict.message
    assert "in-1.kt" in verdict.message


def test_an_honest_candidate_keeps_files_of_its_own(judged):
    verdict = judged.evaluate((HERE / "honest_relu_files_of_its_own.py").read_text())
    assert verdict.status == Status.CORRECT, verdict.message


def test_whatever_blocks_a_hosts_file_in_a_workers_directory_is_that_workers_violation(tmp_path):
    """Each way the host puts a file into a worker's directory (moved from another worker's, written) meets a
    directory under its name as a protocol violation of that worker (`InTheWay`), never an OSError out of the host."""
    source, target = tmp_path / "outbox", tmp_path / "scratch"
    source.mkdir()
    (target / "in-1.kt" / "held").mkdir(parents=True)
    (source / "trial.kt").write_bytes(b"x")
    with pytest.raises(InTheWay, match=r"in-1\.kt"):
        WorkerFiles(source).move_to(str(source / "trial.kt"), WorkerFiles(target), "in-1.kt")
    with pytest.raises(InTheWay, match=r"in-1\.kt"):
        WorkerFiles(target).write("in-1.kt", b"y")
    assert (source / "trial.kt").read_bytes() == b"x"
    assert WorkerFiles(source).move_to(str(source / "trial.kt"), WorkerFiles(target), "in-2.kt").read_bytes() == b"x"


# -- the speedup over torch.compile (the batch's mean and best, the commit's figure) -----------------------------


def timed(
    reference_ms: float, compile_ms: float, candidate_ms: float, control_ms: float, noise: float, draw: int = 5
) -> dict[str, Side]:
    """Ten rounds of three calls, 20 ms of loop a call on both sides (host clock): the reference, the reference under
    torch.compile, the candidate and its controls (the reference's model in the candidate's process); `noise`: the
    round-to-round wobble of every side, drawn independently per side (from `draw`) as on a loaded machine."""
    rng = random.Random(draw)
    sides = {"eager": Side(), "compile": Side(), "candidate": Side()}
    for _ in range(10):
        for name, per_call in (("eager", reference_ms), ("compile", compile_ms), ("candidate", candidate_ms)):
            wobble = 1 + noise * rng.uniform(-1, 1)
            sides[name].rounds.append(Round([per_call * wobble] * 3, None, 3 * (per_call + 20.0) * wobble))
        sides["candidate"].controls.append(Round([reference_ms] * 3, None, 3 * control_ms * rng.uniform(0.99, 1.01)))
    return sides


def test_the_speedup_over_torch_compile_takes_the_controls_measured_gain_too():
    """Red team 12's figures in a run with the compile baseline: a candidate as fast as compiled code whose process
    ran the shared loop far faster (its controls 0.3x the reference's own rounds). Its headline over eager was 1.0,
    widened by the control's gain as time; its speedup over torch.compile, a bare ratio, read that gain whole (a
    batch's mean and best vs torch.compile, the commit's figure): 3.96x, now inside the same widened interval."""
    verdict = speed_figures(timed(41.1, 20.0, 5.0, 0.3 * (41.1 + 20.0), 0.01), "cpu", seed=1)
    assert verdict.speedup == 1.0, verdict.speedup_interval
    assert verdict.speedup_compile is not None and verdict.speedup_compile <= 1.0, verdict.details


def test_the_speedup_over_torch_compile_is_no_gain_where_its_interval_holds_one():
    """A candidate exactly as fast as the compiled reference on a noisy machine (each round +-25%): the ratio of the
    medians of ten rounds read 1.23x over torch.compile here, and a batch's best over its turns keeps the luckiest
    such reading; where the interval holds 1.0 it reads 1.0, as the headline over eager does."""
    verdict = speed_figures(timed(40.0, 20.0, 20.0, 60.0, 0.25, draw=8), "cpu", seed=1)
    low, high = verdict.details["speedup_compile_interval"]
    assert low <= 1.0 <= high and verdict.details["measured_speedup_compile"] > 1.2, verdict.details
    assert verdict.speedup_compile == 1.0, verdict.details


def test_an_honest_kernel_keeps_its_speedup_over_torch_compile():
    """Twice as fast as the compiled reference, in a process whose control runs as the reference's own worker (or
    slower): its 2x over torch.compile stands, and its interval excludes 1."""
    for control_ms in (60.0, 72.0):
        verdict = speed_figures(timed(40.0, 20.0, 10.0, control_ms, 0.01), "cpu", seed=1)
        low, _ = verdict.details["speedup_compile_interval"]
        assert low > 1.5 and verdict.speedup_compile == pytest.approx(2.0, rel=0.05), verdict.details


# -- the events a worker sends before the host asks for them ----------------------------------------------------


def reader(events: int) -> WorkerProcess:
    """The host's real reader of a candidate worker's events, on a pipe into which `events` 1 MB events are written
    (until the reader stops reading)."""
    worker = WorkerProcess.__new__(WorkerProcess)
    read_fd, write_fd = os.pipe()
    worker.role, worker._event_read = "candidate", read_fd
    worker.events, worker.started, worker._queued = queue.Queue(MAX_QUEUED_EVENTS), threading.Event(), Queued()
    threading.Thread(target=worker._read, daemon=True).start()

    def write() -> None:
        with contextlib.suppress(BrokenPipeError):
            for _ in range(events):
                os.write(write_fd, MEGABYTE_EVENT)
        os.close(write_fd)

    threading.Thread(target=write, daemon=True).start()
    return worker


MEGABYTE_EVENT = json.dumps({"event": "load_failed", "name": "x", "message": "m" * ((1 << 20) - 100)}).encode() + b"\n"


def test_events_the_host_has_not_asked_for_are_held_only_up_to_a_bound_in_bytes():
    """Each event may be 1 MB and the reader queued up to 10,000 of them whatever their size: a candidate's thread
    writing valid `load_failed` events while the host waited on its build (or the judge) held up to 10 GB of the
    host's memory. Past MAX_QUEUED_BYTES unread, it is a protocol violation (here after ~64 of 100 such events)."""
    worker = reader(100)
    items = []
    while not isinstance(item := worker.events.get(timeout=60), ProtocolViolation | EOFError):
        items.append(item)
    assert isinstance(item, ProtocolViolation) and "MB of events" in str(item), (len(items), item)
    assert len(items) * len(MEGABYTE_EVENT) <= MAX_QUEUED_BYTES


def test_events_taken_as_they_come_are_never_too_many():
    """The honest counterpart: the same 100 MB of events, each taken by the host as it arrives, all arrive."""
    worker = reader(100)
    taken = [worker.arrival(60) for _ in range(100)]
    assert all(a.event["event"] == "load_failed" for a in taken)
    assert isinstance(worker.events.get(timeout=60), EOFError)  # the end of the pipe, not a violation


# -- the reference's own measurements while a candidate runs ------------------------------------------------------


def test_the_candidate_is_stopped_while_the_reference_measures_the_cpus_peaks(tmp_path, monkeypatch):
    """The CPU's peaks (memory bandwidth, FP32 rate) are measured once per machine, after the first timed candidate,
    and kept in the cache directory for every later evaluation's speed-of-light bound. They were measured with that
    candidate running: its thread's copies (logged with CLOCK_MONOTONIC) ran through the measurement. Now none starts,
    and the peaks are still measured and kept."""
    windows: list[tuple[float, float]] = []
    ask = ReferenceWorker.ask

    def timed_ask(self, command, *names):
        started = time.monotonic()
        try:
            return ask(self, command, *names)
        finally:
            if command.get("cmd") == "measure_peaks":
                windows.append((started, time.monotonic()))

    monkeypatch.setattr(ReferenceWorker, "ask", timed_ask)
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(RELU, project / "relu.py")
    options = EvalOptions(device="cpu", timing_trials=30, shapes="off", timeout_s=120, cache_dir=tmp_path / "cache")
    with Evaluator(load_problem(project / "relu.py"), options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate((HERE / "copies_memory_while_its_worker_waits.py").read_text())
        log = Path(evaluator._candidate_log).read_text() if evaluator._candidate_log else ""
    assert verdict.status == Status.CORRECT, verdict.message
    assert len(windows) == 1 and (tmp_path / "cache" / "machine.json").is_file(), windows
    copies = [float(line.split()[1]) for line in log.splitlines() if line.startswith("copy ")]
    assert copies, log[-2000:]  # it did copy while its worker waited (in the trials' judging)
    ((begin, end),) = windows
    started_during = [c for c in copies if begin < c < end]  # one stopped mid-copy started before, and ends after
    assert not started_during, (len(started_during), len(copies), windows)
