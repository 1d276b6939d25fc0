"""How candidates are judged: the evaluator's options, one frozen object handed to every part of the host side."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def default_cache_dir() -> Path:
    if explicit := os.environ.get("KEVIN_TUI_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kevin-tui"


def spare_count(wanted: int | None) -> int:
    """Spare candidate workers to keep: `wanted`, else two where there are four cores or more (the second
    evaluation of a burst finds one ready; each holds a few hundred MB), one on a smaller machine, where a
    second start would take a core from the builds."""
    if wanted is not None:
        return wanted
    return 2 if (os.cpu_count() or 1) >= 4 else 1


@dataclass(frozen=True)  # built once, at the command line's edge (kevin_tui.arguments)
class EvalOptions:
    device: str = "auto"
    trials: int = 5
    timeout_s: float = 60.0
    build_timeout_s: float = 900.0
    reference_timeout_s: float = 600.0
    strict: bool = False
    seed: int | None = None  # None: a fresh secret per evaluator (recorded in each verdict)
    timing: bool = True
    timing_trials: int | None = None
    compile_baseline: bool | None = None  # None: on for CUDA, off on CPU
    compiled: bool = False  # also judge the candidate's ModelNew under torch.compile (host/compiled.py)
    atol: float | None = None
    rtol: float | None = None
    near_duplicates: bool = True
    # Evidence after a correct verdict (the command line turns both on; a library caller chooses):
    profile: bool = False  # a torch.profiler digest of one call, and custom-kernel coverage
    ncu: str = "off"  # with profile, on CUDA: an Nsight Compute digest ("auto", "off" or ncu's path)
    shapes: str = "off"  # other input sizes: "off", "warn" or "strict"
    # compute-sanitizer on CUDA: "off", "accept" (every tool, when a kernel is accepted) or a comma list of
    # tools run after every correct verdict (host/sanitizer.py)
    sanitize: str = "off"
    sandbox: str = "auto"
    memory_limit: int | None = None  # bytes per worker; None: half the machine's memory
    spare_workers: int | None = None  # candidate workers started ahead; None: spare_count's default
    peaks: dict[str, dict] | None = None  # device name -> {bandwidth_gbs, fp32_tflops, tensor_tflops}
    cache_dir: Path = field(default_factory=default_cache_dir)
