"""Shared fixtures: paths to the KernelBench problems shipped in the package and to our test candidates."""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kevin_tui import kernelbench

TESTS = Path(__file__).parent
CANDIDATES = TESTS / "candidates"
PROBLEMS = TESTS / "problems"
REPO = TESTS.parent
KERNELBENCH = kernelbench.root()  # the package's own copy (KEVIN_TUI_KERNELBENCH: another)
RELU = KERNELBENCH / "level1" / "19_ReLU.py"
FILE_SECONDS = "test-file-seconds.json"  # in the build cache: each test file's seconds when it last ran
FILE_TIMES: dict[str, float] = {}  # this run's, per file
# The candidates build with three sets of flags that take a precompiled header (-O2, -O3, none): under the
# product's 2 GB cap (two headers) they evicted each other in a kept cache, so each CI run made one or two
# headers again (~1 CPU-minute each). The tests' cache holds all three (and one more).
TEST_PCH_MAX_GB = "3"


def has_cuda_device() -> bool:
    return Path("/dev/nvidia0").exists()


def sandbox_here(kind: str) -> str:
    """`kind`, except bwrap where it is not installed (the GPU machine's image): the unshare fallback,
    which is what `--sandbox auto` would use there."""
    import shutil

    return "unshare" if kind == "bwrap" and shutil.which("bwrap") is None else kind


def pytest_collection_modifyitems(config, items):
    if config.getoption("dist", "no") != "no" or hasattr(config, "workerinput"):
        longest_files_first(config, items)
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
    ~0.8 GB each); KEVIN_TUI_TEST_CACHE names one that is kept, KEVIN_TUI_PCH_MAX_GB its header cap."""
    if hasattr(config, "workerinput"):
        return
    if not os.environ.get("KEVIN_TUI_TEST_CACHE"):
        config._kevin_build_cache = tempfile.TemporaryDirectory(prefix="kevin-test-cache-")
        os.environ["KEVIN_TUI_TEST_CACHE"] = config._kevin_build_cache.name
    os.environ.setdefault("KEVIN_TUI_PCH_MAX_GB", TEST_PCH_MAX_GB)
    config._kevin_file_seconds = recorded_file_seconds()


def file_seconds_path() -> Path:
    return Path(os.environ["KEVIN_TUI_TEST_CACHE"]) / FILE_SECONDS


def recorded_file_seconds() -> dict[str, float]:
    try:
        return json.loads(file_seconds_path().read_text())
    except (OSError, ValueError):
        return {}


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Every test process orders the files by what the controller read once: a file written meanwhile by
    another run cannot give two processes different orders (xdist stops on that)."""
    node.workerinput["kevin_file_seconds"] = node.config._kevin_file_seconds


def longest_files_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The test processes take whole files in this order (pyproject: --no-loadscope-reorder), so the files
    that took longest last time start first and no process is left running a long one alone at the end;
    a file never timed goes first of all, and without any record the files go by number of tests (xdist's
    own order)."""
    seconds = getattr(config, "workerinput", {}).get("kevin_file_seconds", {})
    files = Counter(item.nodeid.split("::")[0] for item in items)
    order = {name: (-seconds.get(name, math.inf), -count) for name, count in files.items()}
    items.sort(key=lambda item: order[item.nodeid.split("::")[0]])  # stable: a file's tests keep their order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each file's seconds (setup, call and teardown of its tests), added up where the reports arrive."""
    name = report.nodeid.split("::")[0]
    FILE_TIMES[name] = FILE_TIMES.get(name, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The controller (or the only process) of a whole run (the README's command: every file, no -k or -m,
    not stopped early) records each file's seconds for the next run's order."""
    config = session.config
    whole = config.args_source is pytest.Config.ArgsSource.TESTPATHS and not config.option.keyword
    whole = whole and not config.option.markexpr and not (session.shouldfail or session.shouldstop)
    if hasattr(config, "workerinput") or not whole or exitstatus not in (0, 1) or not FILE_TIMES:
        return
    path = file_seconds_path()
    fresh = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        fresh.write_text(json.dumps({name: round(s, 1) for name, s in sorted(FILE_TIMES.items())}, indent=1))
        fresh.replace(path)
    except OSError:
        fresh.unlink(missing_ok=True)


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
def tiny_model(build_cache) -> Path:
    """The tiny Qwen2, kept in the build cache under the hash of the code that builds it: its build imports
    transformers and trains a tokenizer (~10 s), once per machine rather than once per test process. Built
    beside its place and renamed into it, so a second process building it at once keeps the first's."""
    import hashlib
    import shutil

    from tests import tiny_model as builder

    key = hashlib.sha256(Path(builder.__file__).read_bytes()).hexdigest()[:16]
    kept = build_cache / "tiny-qwen2" / key
    if not (kept / "config.json").exists():
        kept.parent.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=kept.parent))
        builder.build_tiny_model(fresh)
        try:
            fresh.rename(kept)
        except OSError:  # another process's is there
            shutil.rmtree(fresh)
    return kept


@pytest.fixture(scope="session")
def served(tiny_model, tmp_path_factory) -> Iterator[str]:
    """One `transformers serve` of the tiny model per test process, for every test that talks to a real
    server without stopping it (test_models, test_loop, test_batch): a start imports transformers (~10 s)."""
    from kevin_tui.processes import kill_process_group
    from tests.test_models import start_server

    proc, url = start_server(tiny_model, tmp_path_factory.mktemp("serve") / "serve.log")
    yield url
    kill_process_group(proc)


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
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:  # no spare left unused at the end
        yield evaluator
