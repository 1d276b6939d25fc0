"""Red team 19: the trust plan's claims audited against the code (tests/candidates/redteam19/; notes in each
candidate's docstring)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host import scratch as scratch_module
from kevin_tui.evaluator.host.scratch import disk_usage, remove_tree, sweep_stale
from tests.conftest import CANDIDATES, candidate

HERE = CANDIDATES / "redteam19"


def redteam19(name: str) -> str:
    return (HERE / f"{name}.py").read_text()


def _chain(root: Path, levels: int, name: str = "d") -> int:
    """`levels` nested directories under `root`, made one level at a time (as a candidate can, past PATH_MAX);
    returns a descriptor of the deepest (the caller closes it)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    return fd


@pytest.fixture(scope="module")
def plain(relu_problem, build_cache):
    """An evaluator on ReLU without timing, shared by this module's scratch attacks."""
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


def test_files_past_path_max_are_not_hidden_from_the_scratch_measure(tmp_path):
    """By path, the walk could not reach below PATH_MAX and counted what lay there as nothing."""
    fd = _chain(tmp_path, 17, "x" * 250)
    out = os.open("ballast", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, b"\x5a" * (4 << 20))
    os.close(out)
    os.close(fd)
    used = disk_usage(tmp_path, 20_000)
    assert used is None or used >= 4 << 20, used
    remove_tree(tmp_path)
    assert not tmp_path.exists()


def test_the_scratch_measure_is_linear_in_depth_and_bounded(tmp_path):
    """Honest: a few levels are measured exactly; past MAX_DEPTH the scratch counts as over the bound."""
    fd = _chain(tmp_path, 8)
    out = os.open("data", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, b"\x01" * (1 << 20))
    os.close(out)
    os.close(fd)
    used = disk_usage(tmp_path, 20_000)
    assert used is not None and used >= 1 << 20
    fd = _chain(tmp_path, scratch_module.MAX_DEPTH + 4, "e")
    os.close(fd)
    started = time.monotonic()
    assert disk_usage(tmp_path, 20_000) is None
    assert time.monotonic() - started < 1.0


def test_a_tree_deeper_than_pythons_recursion_limit_is_removed_and_links_are_not_followed(tmp_path):
    """shutil.rmtree raised RecursionError on it (Python 3.11), which ignore_errors does not cover."""
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "link").symlink_to(outside)
    os.close(_chain(tree, 1100))
    remove_tree(tree)
    assert not tree.exists()
    assert (outside / "keep.txt").read_text() == "host file"


def test_a_dead_owners_scratch_with_a_deep_tree_does_not_stop_the_next_start(tmp_path):
    """The sweep at every start removed dead owners' scratch with rmtree: a RecursionError there stopped it."""
    dead = tmp_path / f"{scratch_module.PREFIX}dead"
    dead.mkdir()
    (dead / scratch_module.OWNER_FILE).write_text("999999999 0\n")  # no such process
    os.close(_chain(dead, 1100))
    assert sweep_stale(tmp_path) == [dead]
    assert not dead.exists()


def test_a_candidate_hiding_files_past_path_max_is_stopped(plain, monkeypatch):
    """`deep_path_hides_scratch.py`: 256 MB below 17 levels of 250-character names, `correct` before (the bound
    lowered to 64 MB here, as tests/test_redteam.py does for the plain fill)."""
    from kevin_tui.evaluator.host import candidate_run

    monkeypatch.setattr(candidate_run, "SCRATCH_FLOOR", 64 << 20)
    verdict = plain.evaluate(redteam19("deep_path_hides_scratch"))
    assert verdict.status is Status.RUNTIME_ERROR and "scratch directory" in verdict.message, verdict.message


def test_a_candidate_leaving_a_deep_tree_is_cleaned_up_after_its_run(plain):
    """`deep_tree_breaks_cleanup.py`: 1,500 nested directories; the teardown's rmtree raised and the tree stayed
    (and `Evaluator.close` raised, so `eval` printed a traceback, no verdict: the module fixture's close would
    fail this test's teardown). Nested past MAX_DEPTH, it is now over the scratch bound as well."""
    verdict = plain.evaluate(redteam19("deep_tree_breaks_cleanup"))
    assert verdict.status is Status.RUNTIME_ERROR and "nested too deep" in verdict.message, verdict.message
    deadline = time.monotonic() + 60
    while list(plain.scratch.glob("candidate-*/d")) and time.monotonic() < deadline:
        time.sleep(0.2)  # emptied by the host's teardown thread once the sandbox is gone
    assert not list(plain.scratch.glob("candidate-*/d"))


@pytest.fixture(scope="module")
def short_builds(relu_problem, build_cache):
    """An evaluator whose candidates may spend 6 s building, all builds together; relu_cpp's extension built first
    with the default limit (its builds are "cached" only where another test built it before: run alone, a cold
    build took past 6 s and both cases timed out)."""
    warm = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, warm, prespawn=False) as evaluator:
        assert evaluator.evaluate(candidate("relu_cpp.py")).status is Status.CORRECT
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache,
                          build_timeout_s=6.0)  # fmt: skip
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


@pytest.mark.parametrize("seconds", [1.0, 2.5], ids=["fits", "four_builds_past_the_limit"])
def test_a_candidates_builds_share_one_build_limit(short_builds, monkeypatch, seconds):
    """`many_builds_reset_the_build_limit.py`: each build got `--build-timeout` afresh, so N builds held the
    evaluation N times that (4 cold builds, 324 s under `--build-timeout 100`: `correct`). Here four cached builds
    of relu_cpp's extension each take the host `seconds` more (a stand-in for the compiler's time; past its
    deadline a build times out as the builder's wait does): 4 x 1 s fits the 6 s limit, 4 x 2.5 s does not."""
    from kevin_tui.evaluator.host.workers import WorkerTimeout

    broker, deadlines = short_builds.broker, []
    real = broker.build

    def slow(request, versions, source, deadline):
        deadlines.append(deadline)
        time.sleep(seconds)
        if time.monotonic() > deadline:
            raise WorkerTimeout("the builder did not answer in time")
        return real(request, versions, source, deadline)

    monkeypatch.setattr(broker, "build", slow)
    verdict = short_builds.evaluate(redteam19("many_builds_cached"))
    assert len(set(deadlines)) == 1, deadlines
    if seconds < 1.5:
        assert verdict.status is Status.CORRECT, verdict.message
        assert len(deadlines) == 4
    else:
        assert verdict.status is Status.TIMEOUT and "share that limit" in verdict.message, verdict.message


def test_the_round_tripwires_are_in_both_workers_windows_and_still_see_what_a_round_leaves_running(tmp_path):
    """The leftover-work snapshot (threads, child processes: ~0.24 ms here) was taken inside the round, after the
    host's clock started: time in the candidate's window that the reference's identical loop does not have, which
    the host does not subtract (an identical 1 MB ReLU, 0.2-0.3 ms a call after the loop's overhead, 5-17 calls a
    round: 5-16% slower). Moved after the reply, it still landed in the candidate's next window (issue 19); the
    reference's rounds take the same steps now (tests/test_trust_aa.py). The tripwire still sees what a round
    leaves running."""
    import threading

    import torch

    from kevin_tui.evaluator.worker import candidate
    from kevin_tui.evaluator.worker.guards import IdentityGuard

    class Channel:
        def emit(self, name, **fields) -> None:
            pass

    stop, burning = threading.Event(), threading.Event()

    def burn() -> None:
        burning.set()
        while not stop.is_set():
            pass

    def forward(x: torch.Tensor) -> torch.Tensor:  # leaves a thread working from its round's first call on
        if not started:
            started.append(threading.Thread(target=burn, daemon=True))
            started[0].start()
            burning.wait(10)  # running by the time forward returns, even on a loaded machine
        return torch.relu(x)

    started: list[threading.Thread] = []

    run = candidate.CandidateRun.__new__(candidate.CandidateRun)
    run.request, run.scratch, run.channel, run.device = (
        {"threads": torch.get_num_threads(), "output_aliases": False}, tmp_path, Channel(), "cpu"
    )  # fmt: skip
    run.identity, run.get_inputs = IdentityGuard(), lambda: [torch.randn(4, 8)]
    run.model, run.reference = forward, torch.relu
    run.timer_for({})
    try:
        with pytest.raises(candidate.Failure, match="still running after forward returned"):
            run.round({"round": 1, "calls": 3, "seed": 2, "control": False})
    finally:
        stop.set()


def test_the_hosts_own_shortage_of_descriptors_is_no_candidates_fault(tmp_path):
    """Honest counterpart of counting what the walk cannot read as over the bound: when the host itself runs out of
    descriptors the walk raises (the watcher measures again) instead of reading as a scratch over its bound."""
    import errno
    import resource

    os.close(_chain(tmp_path, 12))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 6, hard))
    try:
        with pytest.raises(OSError) as raised:
            disk_usage(tmp_path, 20_000)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert raised.value.errno == errno.EMFILE
    assert disk_usage(tmp_path, 20_000) is not None  # and nothing was left open by the failed walk
    assert len(os.listdir("/proc/self/fd")) <= in_use + 1
