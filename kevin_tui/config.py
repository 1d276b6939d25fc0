"""The run's configuration: typed, built once at the edge (the CLI) from flags and config files.

Config files are read in order, later ones overriding earlier ones: `$XDG_CONFIG_HOME/kevin-tui/
config.toml` (`~/.config/...`), then `kevin-tui.toml` in the current directory; flags override both.
Top-level keys are the long option names with `_` for `-` (`model`, `server`, `budget`, `device`,
`temperature`, ...); a `[sampling]` table is accepted for the sampling options, `[keys]` remaps
the app's keys by binding id (`continue = "space"`), `[peaks."H100"]` (bandwidth_gbs, fp32_tflops,
tensor_tflops) overrides a device's speed-of-light figures, and `[problem]` names a module of yours for
`kevin-tui optimize` to make a problem of (`module`, `init`, `inputs`, `mode`).

Two scopes: `BackendConfig` (kevin_tui.models.factory) says which model to talk to and can serve
many problems in one process; `ProblemConfig` is everything one problem's run needs. `RunConfig`
holds both plus what the front end was asked to do.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kevin_tui.errors import EXIT_USAGE, KevinError
from kevin_tui.evaluator import EvalOptions
from kevin_tui.models.factory import BackendConfig
from kevin_tui.protocol.prompt import DEFAULT_BUDGET

PROJECT_FILE = "kevin-tui.toml"
PROBLEM_KEYS = ("module", "init", "inputs", "mode")


class ConfigError(KevinError):
    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Settings:
    """What the configuration files say: option values by name, key remaps, and the files read."""

    values: dict[str, Any] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    peaks: dict[str, dict] = field(default_factory=dict)  # device name -> speed-of-light figures
    problem: dict[str, Any] = field(default_factory=dict)  # the [problem] table: a module of yours


def config_files(cwd: Path | None = None) -> list[Path]:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [base / "kevin-tui" / "config.toml", (cwd or Path.cwd()) / PROJECT_FILE]


def load_settings(files: list[Path] | None = None) -> Settings:
    values: dict[str, Any] = {}
    keys: dict[str, str] = {}
    peaks: dict[str, dict] = {}
    problem: dict[str, Any] = {}
    sources: list[str] = []
    for path in files if files is not None else config_files():
        if not path.exists():
            continue
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"bad configuration file {path}: {exc}") from None
        sampling = data.pop("sampling", {})
        keys.update(data.pop("keys", {}))
        peaks.update(data.pop("peaks", {}))
        problem.update(data.pop("problem", {}))
        if unknown := sorted(set(problem) - set(PROBLEM_KEYS)):
            raise ConfigError(f"bad configuration file {path}: [problem] has no key {unknown[0]!r} "
                              f"(it takes {', '.join(PROBLEM_KEYS)})")  # fmt: skip
        values.update({k.replace("-", "_"): v for k, v in {**data, **sampling}.items()})
        sources.append(str(path))
    return Settings(values, keys, tuple(sources), peaks, problem)


@dataclass(frozen=True)
class ProblemConfig:
    """One problem's run: what to optimise (or which session to resume), where sessions go, how
    prompts are built and how kernels are judged."""

    problem: Path | None = None
    resume: str | None = None
    sessions_dir: Path = Path("sessions")
    budget: int = DEFAULT_BUDGET
    prompts: Path | None = None
    candidates: int = 1
    trajectories: int = 1
    evaluation: EvalOptions = field(default_factory=EvalOptions)


@dataclass(frozen=True)
class RunConfig:
    """An optimize run: the backend scope, the problem scope, and what the front end was asked to do."""

    backend: BackendConfig = field(default_factory=BackendConfig)
    problem: ProblemConfig = field(default_factory=ProblemConfig)
    turns: int = 8
    notes: tuple[str, ...] = ()
    accept: str | None = None  # "best": commit the best correct kernel at the end (headless)
    accept_slower: bool = False  # with accept: even one slower than the reference
    git_init: bool = False
    json: bool = False
    inline_editor: bool = False
    keys: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchConfig:
    """A batch run (kevin_tui.batch): Kevin's evaluation protocol over many problems with one backend.

    `problem` is the protocol every problem gets (budget, prompts, trajectories, evaluation
    options); its problem and resume fields are unused. The rest says where the run goes and how
    fast: requests in flight, build jobs, evaluation devices, Ray."""

    backend: BackendConfig = field(default_factory=BackendConfig)
    problem: ProblemConfig = field(default_factory=ProblemConfig)
    problems: tuple[Path, ...] = ()
    turns: int = 8
    out: Path = Path("runs/batch")
    resume: bool = False
    concurrency: int = 16  # replies streaming at once, across problems
    build_jobs: int = 0  # kernels building at once; 0: the CPU count
    eval_devices: tuple[str, ...] = ("auto",)
    eval_while_generating: bool = False  # time kernels on the model's own GPU while it generates
    open_problems: int = 0  # problems with a reference running at once; 0: enough to fill concurrency
    ray: str | None = None  # "local", "auto" or a Ray address: evaluate as Ray tasks
    export: Path | None = None  # write the RL training records (prompt, response, verdict, reward) here
    live: bool | None = None  # the live display; None: when stderr is a terminal
    progress_every: float = 30.0  # seconds between progress lines when not live
