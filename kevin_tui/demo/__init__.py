"""`kevin-tui demo`: the whole app, offline, on any machine.

A shipped problem (a ReLU module in KernelBench form) is copied into a new git repository; Kevin's
replies are recorded ones in Kevin's format (reasoning, one code block, a summary), replayed by the
scripted backend at reading speed; everything else is real: the prompts, the g++ builds of each
C++ candidate through load_inline, the checks and timings on the CPU, the session file, and the
commit when a kernel is accepted.
"""

from __future__ import annotations

import shutil
import tempfile
from importlib import resources
from pathlib import Path

from kevin_tui.config import ProblemConfig, RunConfig
from kevin_tui.evaluator import EvalOptions
from kevin_tui.models.backends import scripted_config
from kevin_tui.repo import KernelRepo

PROBLEM = "relu.py"
REPLIES = "relu_replies.json"


def shipped(name: str) -> Path:
    return Path(str(resources.files("kevin_tui.demo") / name))


def prepare_demo(
    directory: Path | None = None, rate: float = 60.0, keys: dict[str, str] | None = None
) -> tuple[RunConfig, Path]:
    """A repository with the demo problem in it, and the configuration of a run on it."""
    directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="kevin-demo-"))
    directory.mkdir(parents=True, exist_ok=True)
    problem = directory / PROBLEM
    shutil.copyfile(shipped(PROBLEM), problem)
    KernelRepo.find(directory, init=True)
    evaluation = EvalOptions(device="cpu")
    config = RunConfig(
        backend=scripted_config(shipped(REPLIES), rate),
        problem=ProblemConfig(problem=problem, sessions_dir=directory / "sessions", evaluation=evaluation),
        keys=dict(keys or {}),
    )
    return config, directory
