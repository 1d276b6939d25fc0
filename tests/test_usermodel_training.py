"""A kernel installed in a model that is trained: real C++ kernels built with g++, the helper that
`kevin-tui apply` writes and commits in a real git repository, tinylm trained with it (issue 20)."""

from __future__ import annotations

import contextlib
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
from tests.conftest import REPO

EXAMPLES = REPO / "examples"
SMALL = {"vocab": 50, "dim": 64, "hidden": 128, "heads": 4, "layers": 2}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def extensions(build_cache) -> Path:
    """Where the kernels' extensions are built (here and in the worker), kept between tests."""
    path = build_cache / "torch_extensions"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def trainable(tmp_path_factory, extensions) -> Path:
    """A git repository holding tinylm and GeluGate's problem, made from a block in train mode."""
    repo = tmp_path_factory.mktemp("trainable") / "proj"
    shutil.copytree(EXAMPLES / "tinylm", repo / "tinylm")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Ada Lovelace")
    git(repo, "config", "user.email", "ada@example.com")
    with contextlib.chdir(repo):
        spec = ModelSpec.parse("tinylm/blocks.py:GeluGate", "dim=64,hidden=128", ["x=float32[2,8,64]"])
        make_problem(spec, "cpu", Path("problems"))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "tinylm")
    return repo


@pytest.fixture
def project(trainable, tmp_path, monkeypatch, extensions) -> Path:
    """A copy of the trainable repository, importable, with the extensions built in one place."""
    shutil.copytree(trainable, tmp_path / "proj")
    monkeypatch.syspath_prepend(str(tmp_path / "proj"))
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(extensions))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.chdir(tmp_path / "proj")
    yield tmp_path / "proj"
    for name in [n for n in sys.modules if n.split(".")[0] == "tinylm"]:
        del sys.modules[name]


def applied_helper(project: Path, kernel_source: Path, **options) -> ModuleType:
    """The helper `kevin-tui apply` writes for the kernel, imported."""
    kernel = project / "problems" / "blocks_GeluGate_kernel.py"
    shutil.copyfile(kernel_source, kernel)
    applied = apply_kernel(kernel.relative_to(project), git=False, **options)
    spec = importlib.util.spec_from_file_location(f"helper_{id(applied)}", project / applied.helper)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_lm(seed: int = 0) -> torch.nn.Module:
    from tinylm.model import TinyLM

    torch.manual_seed(seed)
    return TinyLM(**SMALL)


def loss_of(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    logits = model(tokens[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def gradients(model: torch.nn.Module, tokens: torch.Tensor) -> dict[str, torch.Tensor | None]:
    model.zero_grad()
    loss_of(model, tokens).backward()
    return {name: p.grad for name, p in model.named_parameters()}


def assert_same_gradients(expected: dict, got: dict) -> None:
    assert got.keys() == expected.keys()
    missing = [name for name, grad in got.items() if grad is None]
    assert not missing, f"no gradient for {missing}"
    differ = [n for n in expected if not torch.allclose(got[n], expected[n], rtol=1e-4, atol=1e-6)]
    assert not differ, f"different gradients for {differ}"


def test_training_with_a_forward_only_kernel_installed_gives_the_models_gradients(project):
    helper = applied_helper(project, EXAMPLES / "kernels" / "gelu_gate_cpp.py")
    model = tiny_lm()
    installed = helper.install(copy.deepcopy(model))
    assert type(installed.blocks[0].mlp).__name__ == "ModelNew"
    tokens = torch.randint(0, SMALL["vocab"], (2, 9), generator=torch.Generator().manual_seed(1))
    assert_same_gradients(gradients(model, tokens), gradients(installed, tokens))


def test_apply_check_proves_training_and_compilation_of_the_model(project):
    kernel = project / "problems" / "blocks_GeluGate_kernel.py"
    shutil.copyfile(EXAMPLES / "kernels" / "gelu_gate_cpp.py", kernel)
    model = ModelSpec.parse("tinylm/model.py:TinyLM", ",".join(f"{k}={v}" for k, v in SMALL.items()),
                            ["tokens=int64[2,8]~randint(0,50)"])  # fmt: skip
    applied = apply_kernel(kernel.relative_to(project), check=model, options=CheckOptions("cpu", rounds=3))
    print("\n".join(applied.lines()))
    assert applied.passed, applied.check["message"]
