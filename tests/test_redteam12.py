"""Attacks a twelfth red team wrote against the timing side: the processes' allocators and what the control round
measures (tests/candidates/redteam12/, each file's docstring says the attack, its true verdict and what it got
before the fix)."""

from __future__ import annotations

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.evaluator.verdict import Status
from tests.conftest import candidate


@pytest.fixture(scope="module")
def untimed(relu_problem, build_cache):
    """An evaluator on ReLU without timing (not strict: a probe may raise), one per test module."""
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


# -- every worker's allocator keeps freed memory: no process gets fault-free allocations the other lacks ----------


def test_a_freed_large_tensor_is_reused_without_page_faults_in_the_candidates_worker(untimed):
    """allocator_tuned_relu.py: one `mallopt` in the candidate's library (never mmap, never trim) made its process's
    allocations fault-free while the reference worker's 32 MB inputs and outputs were faulted in page by page:
    its plain C++ ReLU read `correct` 6.8x [1.53-11.39] on problems/relu_32mb.py, its honest twin 0.65x. Every
    worker now starts so: a second 64 MB tensor costs no page faults (16,385 before)."""
    verdict = untimed.evaluate(candidate("redteam12/probe_page_faults.py"))
    assert verdict.status is Status.RUNTIME_ERROR, verdict.message
    faults = int(verdict.message.rsplit("page faults: ", 1)[1].split()[0])
    assert faults < 1000, verdict.message
