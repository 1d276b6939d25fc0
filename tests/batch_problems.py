"""Five KernelBench problems with scripted Kevin-style replies whose verdicts on the CPU are known,
for batch runs in tests and bench/batch_bench.py.

Each problem has two branches of outcomes, one per trajectory: the reply for a prompt is chosen by
what the prompt contains (the problem's text and the markers of the turns before it, see
kevin_tui.models.scripted) and, between the branches, by the trajectory's sampling seed, so every
trajectory gets the same replies in any order, killed and resumed or not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import KERNELBENCH

IMPORTS = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"


@dataclass(frozen=True)
class Plan:
    file: str
    marker: str  # text of the problem, so in every prompt about it
    right: str  # a correct forward expression (pure PyTorch: this is about the pipeline, not kernels)
    branches: tuple[tuple[str, ...], tuple[str, ...]]  # the statuses of trajectories 0 and 1, turn by turn

    @property
    def path(self) -> Path:
        return KERNELBENCH / self.file

    @property
    def key(self) -> str:
        return Path(self.file).stem


PLANS = (
    Plan("level1/19_ReLU.py", "performs a ReLU activation", "torch.relu(x)",
         (("compile_error", "incorrect", "correct"), ("correct", "correct", "correct"))),
    Plan("level1/21_Sigmoid.py", "performs a Sigmoid activation", "torch.sigmoid(x)",
         (("incorrect", "incorrect", "incorrect"), ("runtime_error", "incorrect", "correct"))),
    Plan("level1/22_Tanh.py", "performs a Tanh activation", "torch.tanh(x)",
         (("incorrect", "runtime_error", "format_error"), ("incorrect", "incorrect", "incorrect"))),
    Plan("level1/23_Softmax.py", "performs a Softmax activation", "torch.softmax(x, dim=1)",
         (("correct", "incorrect", "correct"), ("compile_error", "compile_error", "format_error"))),
    Plan("level1/25_Swish.py", "performs a Swish activation", "x * torch.sigmoid(x)",
         (("correct", "correct", "correct"), ("correct", "correct", "correct"))),
)  # fmt: skip


def answer(status: str, expression: str, mark: str) -> str:
    """A reply's answer whose kernel gets `status`; `mark` goes into its code and summary."""
    body = {
        "correct": f"        return {expression}  # {mark}\n",
        "incorrect": f"        return x + 1.0  # {mark}\n",
        "runtime_error": f"        return x.no_such_method()  # {mark}\n",
        "compile_error": f"        return (x  # {mark}\n",
    }
    if status == "format_error":
        return "I would need more time to write this kernel."  # no code: only ever a branch's last turn
    return f"```python\n{IMPORTS}{body[status]}```\nSummary of {mark}: one pass over the input."


def script_entries(plans: tuple[Plan, ...] = PLANS, turns: int = 3) -> list[dict]:
    entries = []
    for plan in plans:
        for branch, statuses in zip("ab", plan.branches, strict=True):
            marks = [f"{plan.key}-{branch}{turn}" for turn in range(1, turns + 1)]
            for turn, status in enumerate(statuses[:turns]):
                entries.append({
                    "reasoning": f"Thinking about {plan.key} ({marks[turn]}).",
                    "answer": answer(status, plan.right, marks[turn]),
                    "when": [plan.marker, *marks[:turn]],
                })  # fmt: skip
    return entries


def write_script(path: Path, plans: tuple[Plan, ...] = PLANS, turns: int = 3) -> Path:
    path.write_text(json.dumps(script_entries(plans, turns)))
    return path


def expected_statuses(plans: tuple[Plan, ...] = PLANS, turns: int = 3) -> dict[str, list[list[str]]]:
    """Per problem, the statuses of trajectory 0 and 1 (sampling seeds 0 and 1), turn by turn."""
    return {plan.key: [list(branch[:turns]) for branch in plan.branches] for plan in plans}
