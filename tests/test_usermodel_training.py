"""A kernel installed in a model that is trained: real C++ kernels built with g++, the helper that
`kevin-tui apply` writes and commits in a real git repository, tinylm trained with it (issue 20)."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from kevin_tui.problem import problem_origin
from kevin_tui.usermodel.apply import CheckOptions, apply_kernel
from kevin_tui.usermodel.problems import make_problem
from kevin_tui.usermodel.specs import ModelSpec
from tests.conftest import CANDIDATES, REPO

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
    return imported(project / applied.helper)


def imported(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"helper_{abs(hash(path))}", path)
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
    """tinylm with the forward-only C++ kernel: the recompute backward, every gradient, 3 SGD and 3 AdamW
    steps, torch.compile with no graph break, all in the output and the commit."""
    kernel = project / "problems" / "blocks_GeluGate_kernel.py"
    shutil.copyfile(EXAMPLES / "kernels" / "gelu_gate_cpp.py", kernel)
    model = ModelSpec.parse("tinylm/model.py:TinyLM", ",".join(f"{k}={v}" for k, v in SMALL.items()),
                            ["tokens=int64[2,8]~randint(0,50)"])  # fmt: skip
    applied = apply_kernel(kernel.relative_to(project), check=model, options=CheckOptions("cpu", rounds=3))
    assert applied.passed, applied.check["message"]
    training = applied.check["training"]
    assert training["backward"] == "recompute" and "cuts the graph" in training["own_backward"]
    assert training["compared"] == 19 and training["max_grad_diff"] < 1e-4
    for name in ("SGD", "AdamW"):
        steps = training["steps"][name]
        assert len(steps["losses_before"]) == 3 and steps["max_param_diff"] < 1e-4
        assert steps["losses_before"] == pytest.approx(steps["losses_after"], rel=1e-4)
    assert training["compiled"]["graph_breaks"] == 0 and training["compiled"]["max_grad_diff"] < 1e-4
    assert training["step"]["before_ms"] > 0 and training["saved_after_bytes"] > 0
    message = git(project, "log", "-1", "--format=%B")
    said = "\n".join(applied.lines())
    for text in ("backward: recomputes the original block", "gradients match: 19 parameters", "3 SGD steps: losses",
                 "3 AdamW steps", "torch.compile: 0 graph breaks", "training step (forward and backward)",
                 "saved for backward per call"):  # fmt: skip
        assert text in message and text in said
    assert "BACKWARD = 'recompute'" in (project / applied.helper).read_text()


def own_backward_kernel(project: Path, grad_up_bias: float = 1.0) -> Path:
    kernel = project / "problems" / "blocks_GeluGate_kernel.py"
    text = (CANDIDATES / "gelu_gate_autograd_cpp.py").read_text()
    kernel.write_text(text.replace("GRAD_UP_BIAS = 1.0", f"GRAD_UP_BIAS = {grad_up_bias}"))
    return kernel.relative_to(project)


def block_gradients(block: torch.nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    x = x.clone().requires_grad_()
    block.zero_grad()
    (block(x) * torch.linspace(-1, 1, x.shape[-1])).sum().backward()
    return {"x": x.grad, **{name: p.grad for name, p in block.named_parameters()}}


def test_a_kernel_with_its_own_backward_is_used_once_its_gradients_match(project):
    applied = apply_kernel(own_backward_kernel(project), check=True, options=CheckOptions("cpu", rounds=2, steps=1))
    assert applied.passed, applied.check["message"]
    assert applied.check["training"]["backward"] == "kernel" and applied.check["training"]["compared"] == 5
    assert "backward: the kernel's own (its gradients match the model's)" in "\n".join(applied.lines())
    helper = imported(project / applied.helper)
    assert helper.BACKWARD == "kernel"
    from tinylm.blocks import GeluGate

    torch.manual_seed(0)
    block = GeluGate(64, 128)
    installed = helper.install(copy.deepcopy(block))
    x = torch.randn(2, 8, 64)
    assert_same_gradients(block_gradients(block, x), block_gradients(installed, x))


def test_a_kernel_whose_own_backward_is_wrong_gets_the_recompute_one(project):
    """No torch.compile check here: the recompute backward under compile is the forward-only kernel's, proven
    by test_apply_check_proves_training_and_compilation_of_the_model."""
    options = CheckOptions("cpu", rounds=2, steps=1, compile=False)
    applied = apply_kernel(own_backward_kernel(project, 2.0), check=True, options=options)
    assert applied.passed, applied.check["message"]
    training = applied.check["training"]
    assert training["backward"] == "recompute" and "the gradient of parameter up.bias" in training["own_backward"]
    helper = imported(project / applied.helper)
    from tinylm.blocks import GeluGate

    torch.manual_seed(0)
    block = GeluGate(64, 128)
    x = torch.randn(2, 8, 64)
    assert_same_gradients(block_gradients(block, x), block_gradients(helper.install(copy.deepcopy(block)), x))


def test_an_own_backward_right_only_on_the_checks_inputs_is_not_used(project):
    """The gradient check ran on the check's inputs only (drawn at a fixed seed): a backward right there and wrong
    elsewhere was kept as the kernel's own. This one (the same C++ build) is right only on the first input its
    backward sees, the check's; the gradients are now compared on new values and at twice the batch too, with a
    loss of fresh weights, and its recompute backward is used instead."""
    kernel = own_backward_kernel(project)
    text = (project / kernel).read_text()
    memorised = text.replace("GRAD_UP_BIAS = 1.0", "SEEN: list = []  # the first input its backward saw: the check's")
    memorised = memorised.replace(
        """        return dx, dup_w, dup_b * GRAD_UP_BIAS, ddown_w, ddown_b""",
        """        x = ctx.saved_tensors[0]
        SEEN[:] = SEEN or [x.detach().clone()]
        seen = x.shape == SEEN[0].shape and torch.equal(x, SEEN[0])
        return dx, dup_w, dup_b * (1.0 if seen else 2.0), ddown_w, ddown_b""",
    )
    assert "* GRAD_UP_BIAS" not in memorised and "SEEN: list" in memorised
    (project / kernel).write_text(memorised)
    applied = apply_kernel(kernel, check=True, options=CheckOptions("cpu", rounds=2, steps=1, compile=False))
    assert applied.passed, applied.check["message"]
    training = applied.check["training"]
    assert training["backward"] == "recompute", training
    assert (
        "the gradient of parameter up.bias" in training["own_backward"]
        and "(on new values)" in training["own_backward"]
    )
    assert training["fresh"] == ["new values", "batch size 4", "odd sizes 1x7x64"]
    assert "on the check's inputs; new values; batch size 4; odd sizes 1x7x64" in "\n".join(applied.lines())


def test_fresh_inputs_are_new_values_in_the_checks_dtypes_and_twice_its_batch():
    from kevin_tui.usermodel.loader import draw
    from kevin_tui.usermodel.specs import parse_inputs
    from kevin_tui.usermodel.worker import SEED, fresh_inputs

    specs = parse_inputs(["x=float64[3,5]", "n=int64[3,2]~randint(0,4)"])
    torch.manual_seed(SEED)
    checks = draw(specs[0])  # the check's own, which a kernel's author can draw too
    (new, values), (batch, doubled), (odd, made_odd) = fresh_inputs(specs, "cpu")
    assert (new, batch, odd) == ("new values", "batch size 6", "odd sizes 3x5, 3x1")
    assert made_odd[0].shape == (3, 5) and made_odd[1].shape == (3, 1)
    assert values[0].dtype == torch.float64 and values[0].shape == (3, 5) and not torch.equal(values[0], checks)
    assert doubled[0].shape == (6, 5) and doubled[1].shape == (6, 2) and doubled[1].dtype == torch.int64


def test_a_fresh_batch_size_the_kernel_refuses_is_listed_once_and_new_values_are_compared():
    """A kernel that fails loudly at another batch size is not a silent wrong output or gradient: that input is
    skipped and said once, for the forward and the gradients alike; the new values at the check's shapes are
    compared by both. The kernel runs once on each fresh input (the gradients' cases are the forward's)."""
    from kevin_tui.usermodel.check import fresh_outputs, gradient_cases

    class FixedBatch(torch.nn.Module):
        calls = 0

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            FixedBatch.calls += 1
            if x.shape[0] != 3:
                raise ValueError("made for a batch of 3")
            return self.inner(x)

    model = torch.nn.Linear(5, 2)
    result: dict = {}
    fresh = [("new values", [torch.randn(3, 5)]), ("batch size 6", [torch.randn(6, 5)])]
    why, compared = fresh_outputs(model, FixedBatch(model), [torch.randn(3, 5)], fresh, result, None, None)
    assert why is None and [label for label, _ in compared] == ["new values"] and FixedBatch.calls == 2
    (skipped,) = result["fresh_skipped"]
    assert skipped.startswith("batch size 6: the kernel does not take it") and "made for a batch of 3" in skipped
    figures: dict = {}
    cases = gradient_cases(model, compared, figures)
    assert [label for label, *_ in cases] == figures["fresh"] == ["new values"] and "fresh_skipped" not in figures
    assert FixedBatch.calls == 2


def test_the_models_gradients_on_a_fresh_input_take_one_forward_call():
    """Each fresh input's loss weights are drawn for the shapes of the model's output, and its gradients taken from
    that same call (a no-grad call for the shapes, then another for the gradients, ran the model twice on it)."""
    from kevin_tui.usermodel.check import gradient_cases
    from kevin_tui.usermodel.training_check import gradients

    class Counted(torch.nn.Linear):
        calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            Counted.calls += 1
            return super().forward(x)

    torch.manual_seed(0)
    model = Counted(5, 2)
    fresh = [("new values", [torch.randn(3, 5)]), ("batch size 6", [torch.randn(6, 5)])]
    figures: dict = {}
    cases = gradient_cases(model, fresh, figures)
    assert Counted.calls == 2 and figures["fresh"] == ["new values", "batch size 6"]
    for (label, inputs, weights, grads), (_, given) in zip(cases, fresh, strict=True):
        assert inputs is given and [w.shape for w in weights] == [(len(given[0]), 2)], label
        again = gradients(model, inputs, weights)[1]  # the gradients are the model's own for those weights
        assert grads.keys() == again.keys() and all(torch.equal(grads[k], again[k]) for k in grads), label


BF16_MODEL = '''import torch
from tinylm.model import TinyLM


def build_model():
    """TinyLM as it is trained in bfloat16."""
    torch.manual_seed(0)
    return TinyLM(vocab=50, dim=64, hidden=128, heads=4, layers=1).to(torch.bfloat16)
'''


def kevin(repo: Path, *args: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run([sys.executable, "-m", "kevin_tui", *args], cwd=repo, env=environment, capture_output=True,
                          text=True, timeout=900)  # fmt: skip


def test_a_bf16_block_is_extracted_judged_and_applied_in_bf16(project, build_cache, monkeypatch):
    monkeypatch.setenv("KEVIN_TUI_CACHE_DIR", str(build_cache))
    (project / "bf16.py").write_text(BF16_MODEL)
    made = kevin(project, "profile", "bf16.py:build_model", "--input", "tokens=int64[2,8]~randint(0,50)", "--calls",
                 "1", "--extract", "GeluGate", "--problems-dir", "bf16")  # fmt: skip
    assert made.returncode == 0, made.stderr + made.stdout
    problem = project / "bf16" / "blocks_GeluGate.py"
    assert problem_origin(problem.read_text())["dtype"] == "bfloat16"
    assert "self.to(torch.bfloat16)  # its parameters are bfloat16 in your model" in problem.read_text()
    assert "x=bfloat16[2,8,64]" in problem_origin(problem.read_text())["inputs"][0]
    kernel = project / "bf16" / "blocks_GeluGate_kernel.py"
    shutil.copyfile(CANDIDATES / "gelu_gate_torch_bf16.py", kernel)
    judged = kevin(project, "eval", "bf16/blocks_GeluGate.py", "bf16/blocks_GeluGate_kernel.py", "--device", "cpu",
                   "--no-timing", "--json")  # fmt: skip
    assert json.loads(judged.stdout)["status"] == "correct", judged.stdout + judged.stderr
    wrong = project / "float32_out.py"
    wrong.write_text(kernel.read_text().replace("FLOAT32_OUTPUT = False", "FLOAT32_OUTPUT = True"))
    judged = kevin(project, "eval", "bf16/blocks_GeluGate.py", "float32_out.py", "--device", "cpu", "--no-timing",
                   "--json")  # fmt: skip
    verdict = json.loads(judged.stdout)
    assert verdict["status"] == "incorrect" and "dtype torch.float32, expected torch.bfloat16" in judged.stdout
    applied = apply_kernel(kernel.relative_to(project), check=True, options=CheckOptions("cpu", rounds=2, steps=1))
    assert applied.passed, applied.check["message"]
    assert applied.check["training"]["compiled"]["graph_breaks"] == 0


def test_the_backward_is_a_problem_and_its_kernel_is_installed_with_the_forwards(project, build_cache, monkeypatch):
    monkeypatch.setenv("KEVIN_TUI_CACHE_DIR", str(build_cache))
    spec = ModelSpec.parse("tinylm/blocks.py:GeluGate", "dim=64,hidden=128", ["x=float32[2,8,64]"])
    path, said = make_problem(spec, "cpu", Path("problems"), backward=True)
    assert path == Path("problems/blocks_GeluGate_backward.py") and said.startswith("wrote")
    assert problem_origin(path.read_text())["backward"] is True
    backward = project / "problems" / "blocks_GeluGate_backward_kernel.py"
    shutil.copyfile(CANDIDATES / "gelu_gate_backward_cpp.py", backward)
    judged = kevin(project, "eval", str(path), str(backward.relative_to(project)), "--device", "cpu", "--no-timing",
                   "--json")  # fmt: skip
    assert json.loads(judged.stdout)["status"] == "correct", judged.stdout + judged.stderr
    kernel = project / "problems" / "blocks_GeluGate_kernel.py"
    shutil.copyfile(EXAMPLES / "kernels" / "gelu_gate_cpp.py", kernel)
    options = CheckOptions("cpu", rounds=2, steps=1)
    applied = apply_kernel(kernel.relative_to(project), check=True, options=options,
                           backward_kernel=backward.relative_to(project))  # fmt: skip
    assert applied.passed, applied.check["message"]
    assert applied.check["training"]["backward"] == "backward_kernel"
    assert applied.check["training"]["compiled"]["graph_breaks"] == 0
    committed = git(project, "show", "--stat", "--format=%B", "HEAD")
    assert "problems/blocks_GeluGate_backward_kernel.py" in committed and "blocks_GeluGate_backward.py" in committed
    helper = imported(project / applied.helper)
    assert (helper.BACKWARD, helper.BACKWARD_KERNEL) == ("backward_kernel", "blocks_GeluGate_backward_kernel.py")
    from tinylm.blocks import GeluGate

    torch.manual_seed(0)
    block = GeluGate(64, 128)
    x = torch.randn(2, 8, 64)
    assert_same_gradients(block_gradients(block, x), block_gradients(helper.install(copy.deepcopy(block)), x))


def test_a_wrong_backward_kernel_is_not_installed(project):
    make_problem(ModelSpec.parse("tinylm/blocks.py:GeluGate", "dim=64,hidden=128", ["x=float32[2,8,64]"]), "cpu",
                 Path("problems"), backward=True)  # fmt: skip
    backward = project / "problems" / "blocks_GeluGate_backward_kernel.py"
    wrong = (CANDIDATES / "gelu_gate_backward_cpp.py").read_text().replace("g.sum(0)}", "2 * g.sum(0)}")
    # an extension name of its own: under the right kernel's name each run rebuilt both (~40 CPU-s each)
    backward.write_text(wrong.replace('name="tinylm_gelu_gate_vjp"', 'name="tinylm_gelu_gate_vjp_wrong"'))
    kernel = project / "problems" / "blocks_GeluGate_kernel.py"
    shutil.copyfile(EXAMPLES / "kernels" / "gelu_gate_cpp.py", kernel)
    head = git(project, "rev-parse", "HEAD")
    applied = apply_kernel(kernel.relative_to(project), check=True, options=CheckOptions("cpu", rounds=2, steps=1),
                           backward_kernel=backward.relative_to(project))  # fmt: skip
    assert applied.passed is False and "the gradient of parameter down.bias" in applied.check["message"]
    assert not (project / applied.helper).exists() and git(project, "rev-parse", "HEAD") == head


AUTOCAST_MODEL = '''import torch
from torch import nn
from tinylm.model import TinyLM


class Mixed(nn.Module):
    """TinyLM in float32, run under bfloat16 autocast (as a mixed-precision training loop runs it)."""

    def __init__(self):
        super().__init__()
        self.lm = TinyLM(vocab=50, dim=64, hidden=128, heads=4, layers=1)

    def forward(self, tokens):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.lm(tokens)
'''


def test_a_block_run_under_autocast_becomes_a_problem_that_runs_under_it(project):
    (project / "mixed.py").write_text(AUTOCAST_MODEL)
    made = kevin(project, "profile", "mixed.py:Mixed", "--input", "tokens=int64[2,8]~randint(0,50)", "--calls", "1",
                 "--extract", "GeluGate", "--problems-dir", "mixed")  # fmt: skip
    assert made.returncode == 0, made.stderr + made.stdout
    text = (project / "mixed" / "blocks_GeluGate.py").read_text()
    assert problem_origin(text)["autocast"] == "bfloat16" and "dtype" not in problem_origin(text)
    assert "with torch.autocast(device, dtype=torch.bfloat16):  # as in your model" in text
    problem = imported(project / "mixed" / "blocks_GeluGate.py")
    model = problem.Model(*problem.get_init_inputs())
    assert model(*problem.get_inputs()).dtype == torch.bfloat16


def test_torch_export_traces_an_installed_kernel_as_its_operator(project):
    """torch.export of a block with the C++ kernel installed: the exported program calls the kernel's custom
    operator (an extension call alone cannot be exported) and its output is the block's."""
    helper = applied_helper(project, EXAMPLES / "kernels" / "gelu_gate_cpp.py")
    from tinylm.blocks import GeluGate

    torch.manual_seed(0)
    block = GeluGate(64, 128).eval()
    installed = helper.install(copy.deepcopy(block))
    x = torch.randn(2, 8, 64)
    exported = torch.export.export(installed, (x,))
    called = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    assert any(target.startswith("kevin_tui.GeluGate_") for target in called), called
    other = torch.randn(2, 8, 64)
    assert torch.allclose(exported.module()(other), block(other), rtol=1e-4, atol=1e-5)


def test_profile_backward_times_each_block_backward_and_extracts_its_backward_problem_too(project):
    init = ",".join(f"{k}={v}" for k, v in {**SMALL, "layers": 1}.items())
    made = kevin(project, "profile", "tinylm/model.py:TinyLM", "--init", init, "--input", "tokens=int64[2,8]~randint(0,50)",
                 "--calls", "1", "--backward", "--extract", "GeluGate", "--problems-dir", "extracted", "--print")  # fmt: skip
    assert made.returncode == 0, made.stderr + made.stdout
    assert re.search(r"\d+ GeluGate: backward \d+\.\d+ ms alone \(forward \d+\.\d+ ms in the model\)", made.stdout)
    assert "GeluGate backward: wrote extracted/blocks_GeluGate_backward.py; next: kevin-tui optimize" in made.stdout
    origin = problem_origin((project / "extracted" / "blocks_GeluGate_backward.py").read_text())
    assert origin["backward"] is True and origin["model"]["target"] == "tinylm/model.py:TinyLM"
    assert (project / "extracted" / "blocks_GeluGate.py").exists()
