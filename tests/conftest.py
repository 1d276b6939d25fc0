"""Shared fixtures: paths to the KernelBench problems shipped in the package and to our test candidates."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from kevin_tui import kernelbench

TESTS = Path(__file__).parent
CANDIDATES = TESTS / "candidates"
PROBLEMS = TESTS / "problems"
REPO = TESTS.parent
KERNELBENCH = kernelbench.root()  # the package's own copy (KEVIN_TUI_KERNELBENCH: another)
RELU = KERNELBENCH / "level1" / "19_ReLU.py"


def has_cuda_device() -> bool:
    return Path("/dev/nvidia0").exists()


def sandbox_here(kind: str) -> str:
    """`kind`, except bwrap where it is not installed (the GPU machine's image): the unshare fallback,
    which is what `--sandbox auto` would use there."""
    import shutil

    return "unshare" if kind == "bwrap" and shutil.which("bwrap") is None else kind


def pytest_collection_modifyitems(config, items):
    if has_cuda_device():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (run scripts/gpu-check.sh on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    """One build cache for the whole run, made by the first process (the controller, when the tests run
    in several): the test processes it starts inherit its path, so each real extension and each set of
    precompiled headers is built once per run, not once per process. Removed afterwards (headers are
    ~0.8 GB each); KEVIN_TUI_TEST_CACHE names one that is kept."""
    if hasattr(config, "workerinput") or os.environ.get("KEVIN_TUI_TEST_CACHE"):
        return
    config._kevin_build_cache = tempfile.TemporaryDirectory(prefix="kevin-test-cache-")
    os.environ["KEVIN_TUI_TEST_CACHE"] = config._kevin_build_cache.name


def pytest_unconfigure(config):
    if made := getattr(config, "_kevin_build_cache", None):
        os.environ.pop("KEVIN_TUI_TEST_CACHE", None)
        made.cleanup()


@pytest.fixture(scope="session")
def build_cache() -> Path:
    return Path(os.environ["KEVIN_TUI_TEST_CACHE"])


@pytest.fixture(scope="session")
def relu_problem():
    from kevin_tui.problem import load_problem

    if not RELU.exists():
        pytest.fail(f"KernelBench problems not found at {KERNELBENCH} (set KEVIN_TUI_KERNELBENCH)")
    return load_problem(RELU)


def processes_with(marker: str) -> list[int]:
    """Pids of processes (anywhere on the machine) whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def gone_within(marker: str, seconds: float) -> bool:
    """True once no process carrying `marker` is left (waiting up to `seconds`)."""
    import time

    deadline = time.monotonic() + seconds
    while processes_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def candidate(name: str) -> str:
    return (CANDIDATES / name).read_text()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from tests.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture
def on_path(project, monkeypatch):
    """The test module's `project` (a copy of examples/tinylm) importable; its modules forgotten after."""
    monkeypatch.syspath_prepend(str(project))
    yield
    for name in [n for n in sys.modules if n.split(".")[0] == "tinylm"]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def strict(relu_problem, build_cache):
    """A --strict evaluator on ReLU without timing, one per test module (test_forgery times its own)."""
    from kevin_tui.evaluator import EvalOptions, Evaluator

    options = EvalOptions(device="cpu", timing=False, shapes="off", strict=True, cache_dir=build_cache)
    with Evaluator(relu_problem, options) as evaluator:
        yield evaluator
