"""Failure patterns seen in real generated kernels (a KernelBench leaderboard, CUDA-L1, QwQ-32B replies),
reproduced with kernels of our own: none may hang, lie about building, or get a message a model cannot act on."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host import cache
from kevin_tui.evaluator.host.cache import evict
from tests.conftest import CANDIDATES
from tests.test_builds import needs_nvcc

PATTERNS = CANDIDATES / "realpattern"


@pytest.fixture(scope="module")
def relu_cpu(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, cache_dir=build_cache, build_timeout_s=600)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


def judge(evaluator: Evaluator, name: str):
    return evaluator.evaluate((PATTERNS / name).read_text())


def test_removed_dispatch_form_gets_the_one_line_fix(relu_cpu):
    verdict = judge(relu_cpu, "dispatch_x_type.py")
    assert verdict.status is Status.COMPILE_ERROR, verdict.message
    assert "x.scalar_type()" in verdict.message and "candidate line" in verdict.message


def test_an_undefined_symbol_at_load_names_the_function(relu_cpu):
    verdict = judge(relu_cpu, "undefined_symbol.py")
    assert verdict.status is Status.COMPILE_ERROR, verdict.message
    assert "loading the built extension failed" in verdict.message
    assert "relu_cuda_impl(at::Tensor)" in verdict.message  # demangled
    (build,) = verdict.details["builds"]
    assert build["ok"] and build["loaded"] is False


def test_a_wrong_load_inline_call_says_what_is_missing(relu_cpu):
    verdict = judge(relu_cpu, "wrong_load_inline_call.py")
    assert verdict.status is Status.RUNTIME_ERROR
    assert "load_inline() missing a required argument: 'cpp_sources'" in verdict.message
    assert "BuildClient" not in verdict.message and "<locals>" not in verdict.message


@needs_nvcc
@pytest.mark.nvcc
def test_nvcc_fatal_lines_are_the_message(relu_cpu):
    verdict = judge(relu_cpu, "nvcc_unsupported_arch.py")
    assert verdict.status is Status.COMPILE_ERROR, verdict.message
    assert "Unsupported gpu architecture" in verdict.message and "TORCH_CUDA_ARCH_LIST" in verdict.message


@needs_nvcc
@pytest.mark.nvcc
def test_tensor_operators_in_host_code_build_with_the_light_headers(relu_cpu):
    verdict = judge(relu_cpu, "tensor_operators_in_host_code.py")
    assert verdict.status is Status.COMPILED, verdict.message
    (build,) = verdict.details["builds"]
    assert build["headers"] == "light"


def test_precompiled_headers_are_capped_least_recently_used_first_and_in_use_ones_stay(tmp_path):
    root = tmp_path / "pch"
    for index, name in enumerate(["old", "used", "newer", "current"]):
        directory = root / name
        directory.mkdir(parents=True)
        (directory / "torch_extension_pch.h.gch").write_bytes(b"x" * 1000)
        (directory / ".used").touch()
        os.utime(directory / ".used", (time.time() - 1000 + index, time.time() - 1000 + index))
    with open(root / "used" / ".lock", "a") as busy:
        fcntl.flock(busy, fcntl.LOCK_SH)  # a build is using it right now
        removed = evict(root, root / "current", limit=2500)
    assert sorted(p.name for p in removed) == ["newer", "old"]
    assert sorted(p.name for p in root.iterdir()) == ["current", "used"]


def test_a_new_flag_set_gets_a_header_only_when_it_fits_or_comes_back(tmp_path, monkeypatch):
    from kevin_tui.evaluator.host.cache import admit

    monkeypatch.setenv("KEVIN_TUI_PCH_MAX_GB", str(2500 / (1 << 30)))
    root = tmp_path / "pch"
    for name in ("a", "b", "new"):
        (root / name).mkdir(parents=True)
    (root / "a" / "torch_extension_pch.h.gch").write_bytes(b"x" * 1000)
    assert admit(root / "b")  # fits beside the one there
    (root / "b" / "torch_extension_pch.h.gch").write_bytes(b"x" * 1000)
    assert not admit(root / "new")  # would evict: built without a header this once
    assert admit(root / "new")  # it came back: worth a header, the least recently used one goes


def test_the_default_cap_holds_two_headers_and_a_killed_builds_partial_is_removed(tmp_path, monkeypatch):
    """A laptop's disk: two ~0.8 GB headers by default (was 3 GB: three, plus builds), and a header a
    killed build left half-written in staging (kevin-tui was killed mid-build) does not linger, however deep
    the tree its sandboxed builder left (2,000 levels made `shutil.rmtree` raise RecursionError)."""
    import os
    import time

    from kevin_tui.evaluator.host.cache import STALE_STAGING_S, max_bytes, sweep_staging

    monkeypatch.delenv("KEVIN_TUI_PCH_MAX_GB", raising=False)
    assert 2 * 800e6 < max_bytes() < 3 * 800e6
    abandoned, building = tmp_path / "0a1b", tmp_path / "2c3d"
    for directory in (abandoned, building):
        directory.mkdir()
        (directory / "torch_extension_pch.h.gch").write_bytes(b"x" * 1000)
    fd = os.open(abandoned, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(2000):
        os.mkdir("d", dir_fd=fd)
        fd, above = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(above)
    os.close(fd)
    old = time.time() - STALE_STAGING_S - 60
    os.utime(abandoned, (old, old))
    assert sweep_staging(tmp_path) == [abandoned]
    assert [p.name for p in tmp_path.iterdir()] == ["2c3d"]  # one being built now stays


def test_the_cache_command_shows_and_cleans(tmp_path, capsys):
    from kevin_tui.cli import main

    (tmp_path / "builds" / "relu-abc").mkdir(parents=True)
    (tmp_path / "builds" / "relu-abc" / "relu.so").write_bytes(b"x" * 2048)
    (tmp_path / "pch" / "k").mkdir(parents=True)
    assert cache.usage(tmp_path)["builds"].entries == 1
    with pytest.raises(SystemExit) as done:
        main(["cache", "--cache-dir", str(tmp_path), "--clean", "builds"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "removed builds" in out and "pch" in out
    assert not (tmp_path / "builds").exists() and (tmp_path / "pch").exists()
    assert Path(tmp_path / "pch" / "k").is_dir()
