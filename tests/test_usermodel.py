"""Your own model, end to end, as a user runs it: real modules (examples/tinylm: a gated-GELU MLP block
that imports its activation from its own package, in a model of several blocks), real git
repositories in temporary directories, the CLI in subprocesses, C++ kernels built with g++."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from textual.widgets import DataTable, Static

from kevin_tui.arguments import build_parser, run_config
from kevin_tui.config import Settings
from kevin_tui.problem import problem_origin
from kevin_tui.repo import AcceptInfo, kernel_file_text
from kevin_tui.session import Header, SessionWriter, load_session
from kevin_tui.session.events import ApplyEvent
from kevin_tui.tui.app import KevinApp
from kevin_tui.tui.profile_screen import ProfileApp, ProfileScreen
from kevin_tui.tui.screens import ConfirmScreen
from kevin_tui.usermodel.apply import Applied, record_in_session
from kevin_tui.usermodel.problems import make_problem
from kevin_tui.usermodel.runner import UserModelProblem
from kevin_tui.usermodel.specs import ModelSpec
from tests.conftest import CANDIDATES, REPO
from tests.fake_judge import InProcessJudge

EXAMPLES = REPO / "examples"
TOKENS = "tokens=int64[2,32]~randint(0,1000)"
HOT = "hidden=2048,layers=2"  # the MLP's hidden size makes GeluGate the hot block by far


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def kevin(repo: Path, *args: str, cache: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "KEVIN_TUI_CACHE_DIR": str(cache),
                   "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", **(env or {})}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "kevin_tui", *args], cwd=repo, env=environment, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def import_path(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def profiled(tmp_path_factory, build_cache) -> tuple[Path, dict]:
    """A git repository holding tinylm, profiled, with GeluGate's problem extracted: (repo, profile)."""
    repo = tmp_path_factory.mktemp("profiled") / "proj"
    shutil.copytree(EXAMPLES / "tinylm", repo / "tinylm")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Ada Lovelace")
    git(repo, "config", "user.email", "ada@example.com")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "tinylm")
    result = kevin(repo, "profile", "tinylm/model.py:TinyLM", "--init", HOT, "--input", TOKENS, "--mode", "eval",
                   "--calls", "3", "--json", "--extract", "1", cache=build_cache)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return repo, json.loads(result.stdout) | {"said": result.stderr}


@pytest.fixture
def project(profiled, tmp_path) -> Path:
    """A copy of the profiled repository, for a test to change."""
    shutil.copytree(profiled[0], tmp_path / "proj")
    return tmp_path / "proj"


def test_profile_ranks_the_hot_block_first_with_its_share_and_the_profilers_cost(profiled):
    _, report = profiled
    first, *others = report["modules"]
    assert first["name"] == "GeluGate" and first["paths"] == ["blocks.0.mlp", "blocks.1.mlp"] and first["calls"] == 2
    assert first["self_ms"] > 2 * max(r["self_ms"] for r in others)
    assert 0.4 < first["share"] < 1 and first["inputs"] == ["x=float32[2,32,256]"]
    assert {r["name"] for r in others} == {"TinyLM", "Block", "Attention", "RMSNorm"}
    assert report["operators"][0]["self_ms"] > 0 and report["operators"][0]["shapes"]
    assert report["plain_ms"] > 0 and report["profiled_ms"] > 0  # both measured in the same run
    assert "1 GeluGate: wrote problems/blocks_GeluGate.py" in report["said"]


def test_the_extracted_problem_computes_what_the_block_computes(profiled, on_path):
    repo, _ = profiled
    problem_path = repo / "problems" / "blocks_GeluGate.py"
    origin = problem_origin(problem_path.read_text())
    assert origin["class"] == "GeluGate" and origin["init"] == {"dim": "256", "hidden": "2048"}
    assert origin["model"]["target"] == "tinylm/model.py:TinyLM" and origin["training"] is False
    text = problem_path.read_text()
    assert "import tinylm" not in text and "from tinylm." not in text and "from ." not in text  # stands alone
    assert "def gelu_tanh" in text and "class Attention" not in text  # the helper it uses, and only that
    problem = import_path(problem_path, "extracted_gelu_gate")
    from tinylm.blocks import GeluGate

    torch.manual_seed(1)
    block = GeluGate(256, 2048).eval()
    model = problem.Model(*problem.get_init_inputs())
    model.load_state_dict(block.state_dict())
    (x,) = problem.get_inputs()
    with torch.no_grad():
        assert torch.equal(model(x), block(x))
    assert x.shape == (2, 32, 256) and not model.training


def test_apply_check_passes_for_a_correct_kernel_commits_and_undo_takes_it_back(project, build_cache):
    kernel = project / "problems" / "blocks_GeluGate_kernel.py"
    shutil.copyfile(EXAMPLES / "kernels" / "gelu_gate_cpp.py", kernel)
    # no torch.compile check: the app's apply (test_apply_is_offered_after_accept_and_checks_the_model) makes it
    result = kevin(project, "apply", str(kernel.relative_to(project)), "--check", "--rounds", "3", "--no-compile",
                   "--device", "cpu", cache=build_cache)  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    assert "2 swapped (blocks.0.mlp, blocks.1.mlp)" in result.stdout and "outputs match" in result.stdout
    assert "torch.compile" not in result.stdout, result.stdout
    helper = project / "problems" / "blocks_GeluGate_apply.py"
    message = git(project, "log", "-1", "--format=%B")
    assert "Kevin-Apply: problems/blocks_GeluGate_apply.py" in message
    assert (
        "Kevin-With: problems/blocks_GeluGate_kernel.py" in message
        and "Kevin-With: problems/blocks_GeluGate.py" in message
    )
    assert "end to end:" in message and "ms before" in message
    use = ("import sys, torch; sys.path.insert(0, '.'); from tinylm.model import TinyLM; "
           "from problems.blocks_GeluGate_apply import install; "
           "print(type(install(TinyLM(hidden=2048)).blocks[1].mlp).__name__)")  # fmt: skip
    on = subprocess.run([sys.executable, "-c", use], cwd=project, capture_output=True, text=True)
    off = subprocess.run([sys.executable, "-c", use], cwd=project, capture_output=True, text=True,
                         env={**os.environ, "KEVIN_TUI_KERNELS": "off"})  # fmt: skip
    assert (on.stdout.strip(), off.stdout.strip()) == ("ModelNew", "GeluGate"), on.stderr + off.stderr
    undo = kevin(project, "undo", cache=build_cache)
    assert undo.returncode == 0 and "removed problems/blocks_GeluGate_apply.py" in undo.stdout
    assert not helper.exists() and kernel.exists()  # the kernel, committed as it was found, stays
    assert git(project, "log", "-1", "--format=%s").strip() == "tinylm"


def test_an_apply_is_recorded_in_the_session_the_kernel_was_accepted_in(tmp_path):
    sessions = tmp_path / "sessions"
    header = Header(id="s-7", created="now", problem={"path": "p.py", "sha256": "", "source": ""}, model="m",
                    backend="scripted")  # fmt: skip
    SessionWriter(sessions / "s-7.jsonl", header).close()
    kernel = tmp_path / "p_kernel.py"
    kernel.write_text(kernel_file_text("class ModelNew: pass\n", AcceptInfo("p", session_id="s-7", turn=2)))
    check = {"passed": True, "speedup": 1.3, "interval": [1.2, 1.4], "swapped": ["blocks.0.mlp"]}
    applied = Applied(kernel, tmp_path / "p_apply.py", check, "tinylm/model.py:build_model", commit="abc123")
    assert record_in_session(applied, sessions) == sessions / "s-7.jsonl"
    (event,) = load_session(sessions / "s-7.jsonl").of_type(ApplyEvent)
    assert (event.passed, event.commit, event.check["speedup"]) == (True, "abc123", 1.3)
    kernel.write_text(kernel_file_text("class ModelNew: pass\n", AcceptInfo("p")))  # accepted outside a session
    assert record_in_session(applied, sessions) is None


def test_apply_check_fails_loudly_for_a_wrong_kernel_and_writes_nothing(project, build_cache):
    kernel = project / "problems" / "blocks_GeluGate_kernel.py"
    shutil.copyfile(CANDIDATES / "gelu_gate_wrong_cpp.py", kernel)
    head = git(project, "rev-parse", "HEAD")
    result = kevin(project, "apply", str(kernel.relative_to(project)), "--check", "--device", "cpu", cache=build_cache)
    assert result.returncode == 1
    assert "FAILED: outputs differ: output:" in result.stdout and "values outside tolerance" in result.stdout
    assert not (project / "problems" / "blocks_GeluGate_apply.py").exists()
    assert git(project, "rev-parse", "HEAD") == head


def test_optimize_from_file_class_writes_the_problem_and_runs_on_it(project, build_cache, tmp_path):
    script = tmp_path / "replies.json"
    code = (EXAMPLES / "kernels" / "gelu_gate_cpp.py").read_text()
    script.write_text(json.dumps([{"reasoning": "Fuse the gate.", "answer": f"```python\n{code}```\nFused."}]))
    result = kevin(project, "optimize", "tinylm/blocks.py:GeluGate", "--init", "dim=256,hidden=512", "--input",
                   "x=float32[2,16,256]", "--headless", "--turns", "1", "--backend", "scripted", "--script", str(script),
                   "--device", "cpu", "--no-timing", "--problems-dir", "made", cache=build_cache)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "wrote made/blocks_GeluGate.py (GeluGate from tinylm/blocks.py:GeluGate(dim=256,hidden=512)" in result.stderr
    assert "correct" in result.stdout
    origin = problem_origin((project / "made" / "blocks_GeluGate.py").read_text())
    assert origin["target"] == "tinylm/blocks.py:GeluGate" and origin["root"] == ".."


@pytest.mark.parametrize(
    ("module", "target", "init", "inputs", "message"),
    [
        ("class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n", "m.py:A", "", ["x=float32[2]"],
         "A has no forward(): nothing to run"),
        ("class B(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n        self.w = nn.Linear(d, d)\n"
         "    def forward(self, x):\n        return self.w(x)\n", "m.py:B", "d=8", ["x=float32[2,3]"],
         "the inputs do not fit B.forward (float32[2, 3]): RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
        ("class C(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        self.register_buffer('calls', torch.zeros(()))\n    def forward(self, x):\n"
         "        self.calls += 1\n        return x * self.calls\n", "m.py:C", "", ["x=float32[2]"],
         "C changes its state when it runs (calls changed)"),
        ("class D(nn.Module):\n    pass\n\n\nclass E(nn.Module):\n    pass\n", "m.py", "", ["x=float32[2]"],
         "m.py defines 2 nn.Module classes (D, E): name one, e.g. m.py:D"),
        ("class F(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n    def forward(self, x):\n"
         "        return x\n", "m.py:F", "e=1", ["x=float32[2]"], "F(e=1) does not fit F(d)"),
    ],
)  # fmt: skip
def test_modules_that_cannot_work_are_one_line_errors(tmp_path, monkeypatch, module, target, init, inputs, message):
    (tmp_path / "m.py").write_text(f"import torch\nfrom torch import nn\n\n\n{module}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with pytest.raises(UserModelProblem) as caught:
        make_problem(ModelSpec.parse(target, init, inputs), "cpu")
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "problems").exists()


def test_a_bad_spec_on_the_command_line_is_one_line_and_starts_nothing(project, build_cache, tmp_path):
    script = tmp_path / "none.json"
    script.write_text("[]")
    result = kevin(project, "optimize", "tinylm/blocks.py:GeluGate", "--input", "x=float33[2]", "--backend",
                   "scripted", "--script", str(script), cache=build_cache)  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "kevin-tui: bad input 'x=float33[2]': unknown dtype float33 (one of bfloat16, bool, float16, float32, "
        "float64, int16, int32, int64, int8, uint8)"
    ]


async def wait_for(pilot, condition, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.1)


def test_the_profile_screen_ranks_modules_and_extracts_the_picked_ones(project, monkeypatch):
    monkeypatch.chdir(project)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spec = ModelSpec.parse("tinylm/model.py:TinyLM", HOT, [TOKENS], "eval")
    app = ProfileApp(spec, "cpu", 2, Path("picked"))
    screens: list[ProfileScreen] = []

    async def run():
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ProfileScreen) and app.screen.report is not None)
            screens.append(app.screen)
            table = app.screen.query_one("#modules", DataTable)
            assert [str(c) for c in table.get_row_at(0)[1:3]] == ["1", "GeluGate"] and table.row_count == 5
            assert "overhead" in str(app.screen.query_one("#profile-summary", Static).render())
            await pilot.press("space", "down", "space")
            assert [table.get_row_at(i)[0] for i in range(3)] == ["✓", "✓", ""]
            await pilot.press("x")
            await pilot.press("q")

    asyncio.run(run())
    first_two = {row.file_name for row in screens[0].report.modules[:2]}
    assert {p.name for p in (project / "picked").iterdir()} == first_two and "blocks_GeluGate.py" in first_two
    assert len(app.said) == 2 and app.said[0].startswith("1 GeluGate: wrote picked/blocks_GeluGate.py")


def test_apply_is_offered_after_accept_and_checks_the_model(project, build_cache, tmp_path, monkeypatch):
    """The app's path from an accepted kernel to the apply check; the kernel is judged in process (the real
    evaluation of a problem made from a model is test_optimize_from_file_class_writes_the_problem_and_runs_on_it's,
    the app's own end-to-end run test_tui's)."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("KEVIN_TUI_CACHE_DIR", str(build_cache))
    # where test_usermodel_training builds the same kernel: loaded in this process from another directory, torch
    # would build it again under a new name (its versioner hashes the build directory)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(build_cache / "torch_extensions"))
    code = (EXAMPLES / "kernels" / "gelu_gate_cpp.py").read_text()
    script = tmp_path / "replies.json"
    script.write_text(json.dumps([{"reasoning": "Fuse the gate.", "answer": f"```python\n{code}```\nFused."}]))
    args = build_parser().parse_args([
        "optimize", "problems/blocks_GeluGate.py", "--device", "cpu", "--no-timing", "--backend", "scripted",
        "--script", str(script), "--sessions-dir", "sessions", "--inline-editor",
    ])  # fmt: skip
    app = KevinApp(config=run_config(args, Settings()), judge=InProcessJudge)

    async def run():
        async with app.run_test(size=(100, 32)) as pilot:
            await wait_for(pilot, lambda: app.driver is not None and not app.driver.busy() and app.views())
            assert app.views()[0].status == "correct"
            await pilot.press("a")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "Install this kernel in your model?" in str(app.screen.query_one("#question", Static).render())
            await pilot.press("y")
            await wait_for(pilot, lambda: "Kevin-Apply" in git(project, "log", "-1", "--format=%B"))
            await pilot.press("q")

    asyncio.run(run())
    (applied,) = load_session(app.driver.session_path).of_type(ApplyEvent)
    assert applied.passed is True and applied.check["swapped"] == ["blocks.0.mlp", "blocks.1.mlp"]
    assert applied.model.startswith("tinylm/model.py:TinyLM(") and applied.commit
    assert git(project, "log", "-2", "--format=%s").splitlines()[1].startswith("feat(blocks_GeluGate): Kevin kernel")


@pytest.mark.gpu
def test_on_a_gpu_profile_ranks_by_kernel_time_and_the_cuda_kernel_checks_in_the_model(project, build_cache):
    tokens = "tokens=int64[8,512]~randint(0,1000)"  # big enough that the MLP's matrix products dominate
    result = kevin(project, "profile", "tinylm/model.py:TinyLM", "--init", HOT, "--input", tokens, "--mode", "eval",
                   "--device", "cuda", "--json", "--extract", "GeluGate", "--problems-dir", "gpu", cache=build_cache)  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["device"].startswith("cuda") and report["gpu"] and report["total_ms"] > 0
    assert report["modules"][0]["name"] == "GeluGate" and 0 < report["modules"][0]["share"] < 1
    assert all(o["name"].startswith("aten::") for o in report["operators"])  # kernels count in their operator
    kernel = project / "gpu" / "blocks_GeluGate_kernel.py"
    shutil.copyfile(EXAMPLES / "kernels" / "gelu_gate_cuda.py", kernel)
    applied = kevin(project, "apply", "gpu/blocks_GeluGate_kernel.py", "--check", "--device", "cuda", "--json",
                    cache=build_cache)  # fmt: skip
    assert applied.returncode == 0, applied.stderr + applied.stdout
    check = json.loads(applied.stdout)["check"]
    assert (
        check["passed"] and check["device"].startswith("cuda") and check["swapped"] == ["blocks.0.mlp", "blocks.1.mlp"]
    )
