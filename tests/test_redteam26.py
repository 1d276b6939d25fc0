"""Red team 26: a verdict that holds where the kernel runs, in the user's model (tests/candidates/redteam26/).
`apply --check` compared the kernel at the check's batch and twice it, whole tiles of a kernel tiled for them;
the installed operators handed the kernel its input, and the backward kernel autograd's gradient, in whatever
layout the model made, where eval had judged them on contiguous tensors only."""

from __future__ import annotations

import copy
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from kevin_tui.usermodel.apply import CheckOptions, apply_kernel
from kevin_tui.usermodel.problems import make_problem
from kevin_tui.usermodel.specs import ModelSpec
from tests.conftest import CANDIDATES, REPO

HERE = CANDIDATES / "redteam26"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A git repository holding tinylm and GeluGate's problem (x=float32[2,8,64]), importable."""
    repo = tmp_path / "proj"
    shutil.copytree(REPO / "examples" / "tinylm", repo / "tinylm")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Ada Lovelace")
    git(repo, "config", "user.email", "ada@example.com")
    monkeypatch.syspath_prepend(str(repo))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.chdir(repo)
    spec = ModelSpec.parse("tinylm/blocks.py:GeluGate", "dim=64,hidden=128", ["x=float32[2,8,64]"])
    make_problem(spec, "cpu", Path("problems"))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "tinylm")
    yield repo
    for name in [n for n in sys.modules if n.split(".")[0] == "tinylm"]:
        del sys.modules[name]


def helper_for(project: Path, name: str, **options) -> tuple[ModuleType | None, object]:
    kernel = project / "problems" / "blocks_GeluGate_kernel.py"
    shutil.copyfile(HERE / f"{name}.py", kernel)
    applied = apply_kernel(kernel.relative_to(project), git=False, **options)
    if not (project / applied.helper).exists():
        return None, applied
    spec = importlib.util.spec_from_file_location(f"helper_{name}", project / applied.helper)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, applied


def block() -> torch.nn.Module:
    from tinylm.blocks import GeluGate

    torch.manual_seed(0)
    return GeluGate(64, 128)


def test_a_kernel_that_never_writes_a_partial_tile_fails_the_check_at_odd_sizes(project):
    """gelu_gate_rows_in_tiles_of_eight_apply.py: rows in tiles of 8, a partial tile never written. The check's
    batch (16 rows) and twice it (32) are whole tiles: it passed, and was wrong at any other sequence length. The
    check compares at odd sizes too now (1x7x64: 7 rows)."""
    _, applied = helper_for(project, "gelu_gate_rows_in_tiles_of_eight_apply", check=True,
                            options=CheckOptions("cpu", rounds=2, steps=1, compile=False))  # fmt: skip
    assert applied.passed is False, applied.check["message"]
    assert "(on odd sizes 1x7x64)" in applied.check["message"], applied.check["message"]


def test_an_honest_kernel_writing_every_row_passes_the_check_at_odd_sizes(project):
    helper, applied = helper_for(project, "honest_gelu_gate_every_row_apply", check=True,
                                 options=CheckOptions("cpu", rounds=2, steps=1, compile=False))  # fmt: skip
    assert applied.passed, applied.check["message"]
    assert "odd sizes 1x7x64" in applied.check["training"]["fresh"], applied.check["training"]
    original = block()
    installed = helper.install(copy.deepcopy(original))
    x = torch.randn(1, 5, 64)
    with torch.no_grad():
        torch.testing.assert_close(installed(x), original(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("name", "honest"), [("gelu_gate_reads_rows_as_stored", False),
                                              ("honest_gelu_gate_every_row_apply", True)])  # fmt: skip
def test_an_installed_kernel_is_given_contiguous_inputs(project, name, honest):
    """gelu_gate_reads_rows_as_stored.py reads x's memory in order, as a raw pointer does: right on every input
    eval gives it (contiguous), wrong on the view a sequence-first model passes; installed, it gets the contiguous
    tensors it was judged on, in inference and in training."""
    helper, _ = helper_for(project, name)
    original = block()
    installed = helper.install(copy.deepcopy(original))
    assert type(installed).__name__ == "ModelNew"
    x = torch.randn(8, 2, 64).transpose(0, 1)  # [batch, sequence, dim], stored sequence first
    with torch.no_grad():
        torch.testing.assert_close(installed(x), original(x), rtol=1e-4, atol=1e-5)
    x.requires_grad_()
    torch.testing.assert_close(installed(x), original(x), rtol=1e-4, atol=1e-5)


def test_a_kernels_own_backward_is_given_a_contiguous_gradient(project):
    """gelu_gate_own_backward_reads_grad_as_stored.py, installed with its own autograd backward (BACKWARD =
    "kernel"), reads the gradient's memory in order: the installed forward makes the gradients into its outputs
    contiguous, as the operator's backward does for a backward kernel."""
    helper, _ = helper_for(project, "gelu_gate_own_backward_reads_grad_as_stored")
    original = block()
    installed = helper.install(copy.deepcopy(original), backward="kernel")
    x, weights = torch.randn(2, 8, 64), torch.randn(8, 2, 64)
    for want, got in zip(_gradients(original, x, weights), _gradients(installed, x, weights), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def _gradients(module: torch.nn.Module, x: torch.Tensor, weights: torch.Tensor) -> list[torch.Tensor]:
    x = x.clone().requires_grad_()
    (module(x).transpose(0, 1) * weights).sum().backward()  # the graph after the block transposes
    return [x.grad, *(p.grad for p in module.parameters())]


def test_an_installed_backward_kernel_is_given_a_contiguous_gradient(project):
    """gelu_gate_backward_reads_grad_as_stored.py reads grad_output's memory in order: right on the backward
    problem's contiguous grad_output, wrong on the transposed gradient a sequence-first model's graph gives the
    block. The operator hands it a contiguous one now."""
    helper, _ = helper_for(project, "honest_gelu_gate_every_row_apply")
    shutil.copyfile(HERE / "gelu_gate_backward_reads_grad_as_stored.py", project / "problems" / "backward_kernel.py")
    helper.BACKWARD_KERNEL = "backward_kernel.py"  # as `apply --check --backward-kernel` writes it
    original = block()
    installed = helper.install(copy.deepcopy(original), backward="backward_kernel")
    x, weights = torch.randn(2, 8, 64), torch.randn(8, 2, 64)
    for want, got in zip(_gradients(original, x, weights), _gradients(installed, x, weights), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("name", "honest"), [("gelu_gate_rows_in_tiles_of_eight_apply", False),
                                              ("honest_gelu_gate_every_row_apply", True)])  # fmt: skip
def test_eval_tries_the_extracted_problems_sequence_length_at_an_odd_size(project, build_cache, name, honest):
    """The extracted problem names every size of its inputs (batch_size, size_8, size_64), so eval's other sizes
    change the sequence length too: where the problem cannot run with every size odd (64 is the Linear's), it runs
    with every one but the last odd (1x7x64), which the tiled kernel gets wrong. It was `correct` under
    `--shapes strict` before (eval varied the batch alone: whole tiles)."""
    from kevin_tui.evaluator import EvalOptions, Evaluator, Status
    from kevin_tui.problem import load_problem

    text = (project / "problems" / "blocks_GeluGate.py").read_text()
    assert "batch_size = 2\nsize_8 = 8\nsize_64 = 64\n" in text, text
    options = EvalOptions(device="cpu", timing=False, shapes="strict", profile=False, cache_dir=build_cache)
    with Evaluator(load_problem(project / "problems" / "blocks_GeluGate.py"), options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate((HERE / f"{name}.py").read_text())
    if honest:
        assert verdict.status is Status.CORRECT, verdict.message
    else:
        assert verdict.status is Status.INCORRECT and "batch_size=1, size_8=7" in verdict.message, verdict.message
