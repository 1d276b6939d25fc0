"""What the reference worker draws and runs at its start: as little as its checks need (a large problem's draw
costs real time), and never less than they need."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from kevin_tui.evaluator.worker import reference as reference_worker

COUNTED = """import torch
from torch import nn

DRAWS = [0]


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    DRAWS[0] += 1
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


class Recorded:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: str, **fields: Any) -> None:
        self.events.append({"event": event, **fields})

    def next_command(self) -> dict[str, Any]:
        return {"cmd": "exit"}


@pytest.mark.parametrize("warm_compile", [False, True])
def test_the_reference_draws_its_inputs_twice_at_start(tmp_path: Path, monkeypatch, warm_compile: bool) -> None:
    """Twice from one seed (the probe: a problem drawing from something no seed fixes is unusable, which takes two
    draws), and no more: the warm compile of --compiled drew a third sample, equal to the probe's second."""
    compiled: list[Any] = []

    def eager(self: reference_worker.Reference) -> Any:  # the compile's own work is not what is counted
        compiled.append(self.model)
        return self.model

    monkeypatch.setattr(reference_worker.Reference, "compiled", eager)
    problem = tmp_path / "counted.py"
    problem.write_text(COUNTED)
    channel = Recorded()
    request = {"problem_path": str(problem), "device": "cpu", "outbox": str(tmp_path), "init_seed": 1,
               "threads": 1, "warm_compile": warm_compile}  # fmt: skip
    reference_worker.run_reference(request, channel)  # type: ignore[arg-type]
    assert [e["event"] for e in channel.events] == ["ready"]
    assert len(compiled) == (1 if warm_compile else 0)
    assert sys.modules["kevin_reference"].DRAWS == [2]


SIZED = COUNTED.replace("DRAWS = [0]", "DRAWS = [0]\nrows = 4").replace("torch.randn(4, 8)", "torch.randn(rows, 8)")


def _reference(tmp_path: Path, text: str) -> reference_worker.Reference:
    problem = tmp_path / "counted.py"
    problem.write_text(text)
    request = {"problem_path": str(problem), "device": "cpu", "outbox": str(tmp_path), "init_seed": 1}
    reference = reference_worker.Reference(request, Recorded())  # type: ignore[arg-type]
    reference.probe(8)
    assert reference.module.DRAWS == [2]
    return reference


def test_other_sizes_draw_once_each(tmp_path: Path) -> None:
    """--shapes (on by default) drew the problem's inputs once more only to learn their size, which the probe has."""
    reference = _reference(tmp_path, SIZED)
    reference.shapes({"eval": 0, "seed": 9, "max_bytes": 1 << 30})
    variants = reference.channel.events[-1]["variants"]  # type: ignore[attr-defined]
    assert [label for label, _, _ in variants] == ["rows=2", "rows=8", "rows=3"]
    assert reference.module.DRAWS == [2 + 3]
    # the doubled size is still left out where it would pass the bound, as the probe's size says
    reference.shapes({"eval": 0, "seed": 9, "max_bytes": 2 * 4 * 8 * 4 - 1})
    assert [label for label, _, _ in reference.channel.events[-1]["variants"]] == ["rows=2", "rows=3"]  # type: ignore[attr-defined]


def test_the_timed_sides_share_one_draw_that_decides_how_they_draw(tmp_path: Path, monkeypatch) -> None:
    """The eager and compiled reference sides drew once each to decide the same thing about the same get_inputs."""
    monkeypatch.setattr(reference_worker.Reference, "compiled", lambda self: self.model)
    reference = _reference(tmp_path, COUNTED)
    reference.timer_for({"sides": ["eager", "compiled"]})
    assert reference.module.DRAWS == [3]
    assert reference.timers["eager"].inputs is reference.timers["compiled"].inputs
