"""The KernelBench problems shipped in the package: `kernelbench:` names, every command's use of them,
and a clone that needs nothing beside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kevin_tui import kernelbench
from kevin_tui.arguments import batch_config, build_parser
from kevin_tui.config import load_settings
from kevin_tui.problem import load_problem
from kevin_tui.repo import kernel_path_for
from tests.conftest import CANDIDATES, REPO


def test_both_levels_ship_with_their_licence_and_attribution():
    assert len(kernelbench.level_files("level1")) == 100 and len(kernelbench.level_files("level2")) == 100
    assert "MIT License" in (kernelbench.SHIPPED / "LICENSE").read_text()
    assert "ScalingIntelligence/KernelBench" in (kernelbench.SHIPPED / "README.md").read_text()
    for path in kernelbench.level_files("level1")[:5] + kernelbench.level_files("level2")[:5]:
        load_problem(path)  # each is a usable problem, read from the package


@pytest.mark.parametrize(
    "name", ["kernelbench:level1/19", "kernelbench:level1/19_ReLU", "kernelbench:level1/19_ReLU.py"]
)
def test_a_problem_is_named_by_number_stem_or_file(name):
    assert kernelbench.resolve_one(name) == kernelbench.SHIPPED / "level1" / "19_ReLU.py"


def test_a_level_is_in_problem_order_and_only_batch_takes_it():
    files = kernelbench.resolve("kernelbench:level2")
    assert [kernelbench.problem_number(p) for p in files] == list(range(1, 101))
    with pytest.raises(kernelbench.KernelBenchNameError, match="names 100 problems; name one"):
        kernelbench.resolve_one("kernelbench:level2")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("kernelbench:level3/1", r"no such level .*\(levels: level1, level2\)"),
        ("kernelbench:level1/999", "no such problem"),
        ("kernelbench:level1/Softmax", "did you mean kernelbench:level1/23_Softmax"),
    ],
)
def test_a_wrong_name_says_what_exists(name, message):
    with pytest.raises(kernelbench.KernelBenchNameError, match=message):
        kernelbench.resolve(name)


def test_the_override_points_at_another_copy(tmp_path, monkeypatch):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "7_Mine.py").write_text((kernelbench.SHIPPED / "level1" / "19_ReLU.py").read_text())
    monkeypatch.setenv("KEVIN_TUI_KERNELBENCH", str(tmp_path))
    assert kernelbench.resolve_one("kernelbench:level1/7") == tmp_path / "level1" / "7_Mine.py"


def test_every_command_takes_the_names():
    parser = build_parser()
    relu = str(kernelbench.SHIPPED / "level1" / "19_ReLU.py")
    assert parser.parse_args(["eval", "kernelbench:level1/19", "c.py"]).problem == relu
    assert parser.parse_args(["ask", "kernelbench:level1/19"]).problem == relu
    assert parser.parse_args(["optimize", "kernelbench:level1/19"]).problem == relu
    batch = batch_config(parser.parse_args(["batch", "kernelbench:level1", "kernelbench:level2/12", "x.py"]),
                         load_settings([]))  # fmt: skip
    assert len(batch.problems) == 102 and batch.problems[-2].name == "12_Gemm_Multiply_LeakyReLU.py"
    assert batch.problems[-1] == Path("x.py")


def test_a_kernel_for_a_shipped_problem_is_written_where_you_are(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert kernel_path_for(kernelbench.resolve_one("kernelbench:level1/19")) == tmp_path / "19_ReLU_kernel.py"
    mine = tmp_path / "sub" / "relu.py"
    assert kernel_path_for(mine) == tmp_path / "sub" / "relu_kernel.py"


def test_eval_by_name_judges_accepts_into_the_current_repository_and_undo_takes_it_back(tmp_path, build_cache,
                                                                                        monkeypatch):  # fmt: skip
    """`kevin-tui eval --accept` as a user runs it (the CLI's real accept and undo; one evaluation serves both)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    shipped = sorted(kernelbench.SHIPPED.rglob("*"))

    def kevin(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kevin_tui", *args], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip

    result = kevin("eval", "kernelbench:level1/19", str(CANDIDATES / "relu_torch.py"), "--device", "cpu", "--no-timing",
                   "--json", "--accept", "--git-init", "--cache-dir", str(build_cache))  # fmt: skip
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["status"] == "correct" and verdict["accepted"]["commit"]
    assert (tmp_path / "19_ReLU_kernel.py").exists()
    assert sorted(kernelbench.SHIPPED.rglob("*")) == shipped  # nothing written into the package
    log = subprocess.run(["git", "log", "--format=%s"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert log.startswith("feat(19_ReLU): Kevin kernel, speed not measured"), log  # --no-timing: no claim of speed
    undo = kevin("undo", str(tmp_path))
    assert undo.returncode == 0 and "removed 19_ReLU_kernel.py" in undo.stdout, undo.stdout + undo.stderr
    assert not (tmp_path / "19_ReLU_kernel.py").exists()
    again = kevin("undo", str(tmp_path))
    assert again.returncode == 1 and "nothing to undo" in again.stderr


OUTSIDE = ("../" + "shared", "/work/" + "shared")  # spelt apart, so this file does not name them


def test_no_test_example_or_readme_command_reads_outside_the_clone():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for name in tracked:
        path = REPO / name
        if (
            path.suffix in {".py", ".sh", ".md", ".toml"}
            and path.is_file()
            and not name.startswith("kevin_tui/kernelbench")
        ):
            text = path.read_text(errors="replace")
            if any(outside in text for outside in OUTSIDE):
                offenders.append(name)
    assert offenders == []
