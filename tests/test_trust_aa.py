"""A/A: an identical kernel must not read slower than the reference for work the two workers' rounds do
differently outside the calls (issue 19: a median of 0.64x over ten A/A evaluations of a 1 MB ReLU on the CPU).

The candidate worker ran its round's tripwires (and removed a control round's file) after its reply; the host
stops the candidate on that reply (a main round's, to read its outputs) or soon after (the reference's next
round is timed with it stopped), so that work ran in the CPU time charged up to the stop and then in the
candidate's next window: ~0.5-2 ms a round there, none in the reference's. Now both workers' rounds take the
same steps, all of them before the reply, and the host removes every round's file.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.worker import guards, tensorfile
from kevin_tui.evaluator.worker.candidate import CandidateRun
from kevin_tui.evaluator.worker.reference import Reference


class Steps:
    """The bookkeeping steps a worker's round takes, in order, and where its reply fell among them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.taken: list[str] = []
        for holder, name, label in ((guards.IdentityGuard, "replaced", "identity"),
                                    (guards.LeftoverGuard, "leftovers", "leftovers"),
                                    (guards.LeftoverGuard, "__init__", "snapshot"),
                                    (tensorfile, "write", "write"), (os, "unlink", "unlink")):  # fmt: skip
            monkeypatch.setattr(holder, name, self.noted(label, getattr(holder, name)))

    def noted(self, label: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.taken.append(label)
            return fn(*args, **kwargs)

        return wrapper

    def emit(self, event: str, **fields: Any) -> None:
        self.taken.append(event)

    def of(self, run: Any) -> list[str]:
        self.taken.clear()
        run()
        return list(self.taken)


def relu_problem_inputs() -> list[torch.Tensor]:
    return [torch.randn(4, 256)]


def test_both_workers_rounds_take_the_same_steps_and_none_after_the_reply(tmp_path, monkeypatch):
    steps = Steps(monkeypatch)  # before the candidate's guard records what it watches
    reference = Reference.__new__(Reference)
    reference.channel, reference.outbox, reference.device = steps, tmp_path, "cpu"
    reference.module, reference.model = SimpleNamespace(get_inputs=relu_problem_inputs), torch.nn.ReLU()
    reference.timer_for({"sides": ["eager"]})
    (tmp_path / "candidate").mkdir()
    run = CandidateRun.__new__(CandidateRun)
    run.request, run.scratch, run.channel, run.device = (
        {"threads": torch.get_num_threads(), "output_aliases": False}, tmp_path / "candidate", steps, "cpu"
    )  # fmt: skip
    run.identity, run.get_inputs = guards.IdentityGuard(), relu_problem_inputs
    run.model, run.reference = torch.nn.ReLU(), torch.nn.ReLU()
    run.timer_for({})
    ours = steps.of(lambda: reference.round({"side": "eager", "round": 1, "calls": 3, "seed": 7}))
    main = steps.of(lambda: run.round({"round": 1, "calls": 3, "seed": 7, "control": False}))
    control = steps.of(lambda: run.round({"round": 1, "calls": 3, "seed": 7, "control": True}))
    assert main == control == ours, "the candidate's rounds take steps the reference's does not"
    assert ours[-1] == "round_done", f"work left for after the reply: {ours[ours.index('round_done') + 1 :]}"
    assert {"identity", "leftovers", "snapshot"} <= set(ours), "the round's tripwires are gone"


def test_the_host_removes_every_rounds_file(relu_problem, build_cache, tmp_path):
    """No worker removes its round's file after its reply now; the host does, for both (a file left in the
    reference's outbox would be rewritten each round, one in the candidate's scratch counts against its bound)."""
    same = (
        "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    )
    options = EvalOptions(device="cpu", shapes="off", profile=False, cache_dir=build_cache, timing_trials=9)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate(same)
        assert verdict.status is Status.CORRECT, verdict.message
        left = list(Path(evaluator.scratch).rglob("round-*.kt"))
    assert not left, left
