"""A sandbox that locks: real escapes that undo the sandbox itself, against bwrap and the unshare jail.

Each attack (tests/candidates/escape/) computes ReLU correctly when it fails and returns zeros when it
succeeds; each test checks from outside as well: the project's problem file and the build cache
unchanged, no process of the candidate left, the evaluator still working.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status, seccomp
from kevin_tui.evaluator.host.cgroups import parent_for, sweep_orphans
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, RELU, gone_within, processes_with

ESCAPES = CANDIDATES / "escape"
SURVIVOR = "kevin-escape-survivor"


HOST_MADE = re.compile(r"\.tmp-.+|[A-Za-z0-9_]+-[0-9a-f]{20}")  # a build being made, a finished build


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and modification time: what "unchanged" is checked against."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


def cache_unchanged(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> bool:
    """Every finished build that was there is as it was, and whatever appeared is a build the host makes: the
    test processes beside this one build into the same cache meanwhile (as two kevin-tui runs would)."""
    settled = {name for name in before if not name.startswith(".tmp-")}
    kept = {name: before[name] for name in settled}
    entries = {name.split("/")[0] for name in settled}
    same_entries = {name: stamp for name, stamp in after.items() if name.split("/")[0] in entries}
    new_entries = {name.split("/")[0] for name in after} - entries
    return same_entries == kept and all(HOST_MADE.fullmatch(entry) for entry in new_entries)


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def judged(request, tmp_path_factory, build_cache):
    """An evaluator in the given sandbox, judging a copy of the ReLU problem in a project of its own (4 GiB: the
    memory limit covers a whole sandbox now, and the builder's compiler needs about 2)."""
    project = tmp_path_factory.mktemp("project")
    shutil.copy(RELU, project / "relu.py")
    options = EvalOptions(device="cpu", timing=False, timeout_s=120, sandbox=request.param, memory_limit=4 << 30,
                          cache_dir=build_cache)  # fmt: skip
    with Evaluator(load_problem(project / "relu.py"), options, prespawn=False) as evaluator:
        evaluator.limits.processes = 256
        yield evaluator, project


def judge(evaluator: Evaluator, project: Path, name: str) -> Status:
    """The verdict on one attack, after checking that nothing outside its sandbox changed."""
    problem, cache = (project / "relu.py").read_bytes(), tree(evaluator.options.cache_dir / "builds")
    verdict = evaluator.evaluate((ESCAPES / name).read_text())
    assert verdict.sandbox == evaluator.sandbox.kind
    assert (project / "relu.py").read_bytes() == problem, "the candidate rewrote the problem file"
    assert sorted(p.name for p in project.iterdir()) == ["relu.py"]
    assert cache_unchanged(cache, tree(evaluator.options.cache_dir / "builds")), "the build cache changed"
    return verdict.status


def test_the_host_holds_every_sandbox_by_its_first_process(judged):
    evaluator, _ = judged
    evaluator.reference_ready()
    assert evaluator.reference.process is not None and evaluator.reference.process.holds_namespace


def test_no_remount_makes_a_read_only_bind_writable(judged):
    evaluator, project = judged
    assert judge(evaluator, project, "remount_writable.py") is Status.CORRECT


def test_the_kill_cannot_be_undone_from_inside(judged):
    evaluator, project = judged
    try:
        assert judge(evaluator, project, "undo_the_kill.py") is Status.CORRECT
        assert gone_within(SURVIVOR, 3.0), "a process of the candidate outlived its verdict"
    finally:
        for pid in processes_with(SURVIVOR):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_the_candidate_sees_only_its_own_libraries(judged):
    evaluator, project = judged
    built = evaluator.evaluate((CANDIDATES / "relu_cpp.py").read_text())  # one build in the cache, loaded from a copy
    assert built.status is Status.CORRECT, built.message
    assert any((evaluator.options.cache_dir / "builds").glob("*/main.cpp")), "the build left no sources to find"
    assert judge(evaluator, project, "read_other_builds.py") is Status.CORRECT


def test_the_kernel_calls_a_sandbox_never_needs_are_refused(judged):
    evaluator, project = judged
    assert judge(evaluator, project, "kernel_surface.py") is Status.CORRECT


def test_the_first_process_of_the_namespace_cannot_be_rewritten(judged):
    evaluator, project = judged
    assert judge(evaluator, project, "rewrite_pid_one.py") is Status.CORRECT


def test_the_evaluator_still_works_after_every_attack(judged):
    evaluator, _ = judged
    assert evaluator.evaluate((CANDIDATES / "relu_torch.py").read_text()).status is Status.CORRECT


@pytest.mark.skipif(parent_for("memory") is None, reason="no writable memory cgroup on this machine")
@pytest.mark.parametrize("sandbox", ["bwrap", "unshare"])
def test_tmpfs_pages_count_against_the_memory_limit(sandbox, tmp_path, build_cache):
    shutil.copy(RELU, tmp_path / "relu.py")
    options = EvalOptions(device="cpu", timing=False, timeout_s=120, sandbox=sandbox, memory_limit=1 << 30,
                          cache_dir=build_cache)  # fmt: skip
    with Evaluator(load_problem(tmp_path / "relu.py"), options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate((ESCAPES / "fill_shared_memory.py").read_text())
    assert verdict.status is Status.RUNTIME_ERROR, f"{verdict.status}: {verdict.message}"
    assert "memory" in verdict.message


@pytest.mark.skipif(parent_for("pids") is None, reason="no writable pids cgroup on this machine")
def test_what_a_dead_kevin_tui_left_in_its_cgroups_is_killed_by_the_next_one(tmp_path):
    """A host SIGKILLed while one of its sandboxes outlives it: the next evaluator's sweep kills what is left."""
    pid_file, groups_file = tmp_path / "leftover", tmp_path / "groups"
    owner = (
        "import subprocess, sys\n"
        "from kevin_tui.evaluator.host.cgroups import ResourceGroup\n"
        "group = ResourceGroup(64, 1 << 30)\n"
        "child = subprocess.Popen(group.wrap([sys.executable, '-c', 'import time; time.sleep(600)  # kevin-leftover']),"
        " start_new_session=True)\n"
        f"open({str(groups_file)!r}, 'w').write('\\n'.join(map(str, group.paths)))\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
    )
    subprocess.run([sys.executable, "-c", owner], check=True, cwd=Path(__file__).parents[1], timeout=60)
    leftover, groups = int(pid_file.read_text()), [Path(p) for p in groups_file.read_text().split()]
    try:
        assert processes_with("kevin-leftover") == [leftover] and all(g.exists() for g in groups)  # owner gone, not it
        sweep_orphans()
        deadline = time.monotonic() + 5
        while processes_with("kevin-leftover") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not processes_with("kevin-leftover")
        assert not any(g.exists() for g in groups)
    finally:
        with contextlib.suppress(OSError):
            os.kill(leftover, signal.SIGKILL)


def test_the_filter_numbers_are_this_machines_system_calls():
    """The table of denied calls is typed in; here it is checked against the kernel headers, where present."""
    header = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
    if not header.exists():
        pytest.skip("no x86_64 kernel headers here")
    numbers = dict(re.findall(r"#define __NR_(\w+) (\d+)", header.read_text()))
    for name, (x86_64, _) in seccomp.DENIED.items():
        assert x86_64 is not None and int(numbers[name]) == x86_64, name
    assert int(numbers["clone"]) == seccomp.CLONE[0] and int(numbers["clone3"]) == seccomp.CLONE3[0]
    assert int(numbers["ioctl"]) == seccomp.IOCTL[0]


@pytest.mark.skipif(parent_for("freezer") is None, reason="no writable freezer cgroup on this machine")
def test_a_frozen_group_stops_a_detached_forking_daemon_and_still_dies_when_killed(tmp_path):
    """What `WorkerProcess.held` relies on while the host reads a candidate's outputs: a `setsid` daemon that
    forks all the time (which a walk of the process tree misses or is outrun by) does nothing while its
    group is frozen, and a SIGKILL sent meanwhile still empties the group."""
    from kevin_tui.evaluator.host.cgroups import ResourceGroup

    count = tmp_path / "count"
    daemon = f"while :; do echo x >> {count}; (echo y >> {count}); done"
    group = ResourceGroup(64, 1 << 30)
    parent = subprocess.Popen(group.wrap(["sh", "-c", f"setsid sh -c '{daemon}' & exec sleep 600"]))
    try:
        deadline = time.monotonic() + 10
        while (not count.exists() or count.stat().st_size < 100) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert group.freeze()
        frozen_at = count.stat().st_size
        time.sleep(0.3)
        assert count.stat().st_size == frozen_at  # nothing ran, forked children included
        group.thaw()
        time.sleep(0.3)
        assert count.stat().st_size > frozen_at
        assert group.freeze()
        reaper = threading.Thread(target=parent.wait)  # ours to reap, as a worker's is the host's
        reaper.start()
        started = time.monotonic()
        group.kill_all()
        assert not any(path.exists() for path in group.paths)  # emptied and removed
        assert time.monotonic() - started < 10  # not the 18 s of three groups waiting on frozen processes
    finally:
        group.thaw()
        group.kill_all()
        parent.wait(timeout=10)
