"""Red team 23: the warm worker starts (the nursery) and the `unshare` jail, now the default sandbox.

Real evaluations in both sandboxes. Each attacking candidate computes ReLU when its attack fails and zeros
when it succeeds, so CORRECT means it found nothing; each honest one must stay CORRECT.
"""

from __future__ import annotations

import shutil

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, RELU, sandbox_here

HERE = CANDIDATES / "redteam23"


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def judged(request, tmp_path_factory, build_cache):
    project = tmp_path_factory.mktemp("project")
    shutil.copy(RELU, project / "relu.py")
    options = EvalOptions(device="cpu", timing=False, shapes="off", timeout_s=120, sandbox=sandbox_here(request.param),
                          cache_dir=build_cache)  # fmt: skip
    with Evaluator(load_problem(project / "relu.py"), options, prespawn=False) as evaluator:
        yield evaluator


def verdict_of(evaluator: Evaluator, name: str):
    verdict = evaluator.evaluate((HERE / name).read_text())
    assert verdict.sandbox == evaluator.sandbox.kind
    return verdict


def test_no_global_kernel_setting_in_proc_opens_for_writing(judged):
    """/proc/sys (core_pattern: a program run as the host's root), /proc/irq, /proc/bus/pci: where the host
    runs as root, the sandbox's uid 0 is root to every uid check, so only a read-only /proc keeps them shut."""
    verdict = verdict_of(judged, "proc_kernel_knobs_writable.py")
    assert verdict.status == Status.CORRECT, verdict.message


def test_an_honest_candidate_still_reads_proc(judged):
    verdict = verdict_of(judged, "honest_relu_reads_proc.py")
    assert verdict.status == Status.CORRECT, verdict.message


def test_calls_newer_than_the_filter_and_vsock_are_refused(judged):
    verdict = verdict_of(judged, "newer_kernel_calls_and_vsock.py")
    assert verdict.status == Status.CORRECT, verdict.message


def test_an_honest_candidate_still_uses_sockets_and_threads(judged):
    verdict = verdict_of(judged, "honest_relu_sockets_and_threads.py")
    assert verdict.status == Status.CORRECT, verdict.message
