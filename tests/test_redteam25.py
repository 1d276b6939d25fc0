"""Red team 25: the host's files in a candidate's scratch, the clock and the build cache.

Real evaluations of ReLU on the CPU in the default sandbox. Each attacking candidate computes ReLU, so the verdict
it should get is decided by the host's handling alone; each honest one must stay CORRECT.
"""

from __future__ import annotations

import shutil

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host.scratch import InTheWay, WorkerFiles
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
