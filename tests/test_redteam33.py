"""Red team 33: --strict's runtime evidence, the build path and the sandbox (tests/candidates/redteam33/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, RELU

HERE = CANDIDATES / "redteam33"


def _evaluate(name: str, build_cache: Path, problem: Path = RELU, **options):
    settings = {"device": "cpu", "shapes": "off", "profile": False, "timing": False, "cache_dir": build_cache}
    settings.update(options)
    with Evaluator(load_problem(problem), EvalOptions(**settings), prespawn=False) as ev:
        return ev.evaluate((HERE / f"{name}.py").read_text())


def test_a_library_the_candidate_built_itself_is_seen_under_strict(build_cache):
    """own_build_of_torch_kernel.py: a clean host-built copy, then `at::cpu::clamp_min` (PyTorch's kernel, past the
    dispatcher) in a library the candidate compiled itself with a fresh copy of torch.utils.cpp_extension, from a
    hex-spelt source: `correct` under --strict with no finding. A library mapped executable from a writable file
    system of the sandbox that the host never built is now named by the op count (`ops_unseen`)."""
    verdict = _evaluate("own_build_of_torch_kernel", build_cache, strict=True)
    assert verdict.status is Status.REJECTED, verdict.message
    assert "never built" in verdict.message, verdict.message
    assert "redteam33_hidden" in verdict.message, verdict.message


def test_a_build_is_stopped_once_its_directory_holds_more_than_a_build_may_leave(build_cache):
    """build_fills_the_disk.py: four objects of 300 MB each, every one under the builder's file-size limit, went into
    the build directory on the host's disk (1.2 GB seen), measured only once the build was over: with a few hundred
    the disk filled first. The directory is measured as the builder writes now, and the builder stopped past 512 MB."""
    verdict = _evaluate("build_fills_the_disk", build_cache)
    assert verdict.status is Status.COMPILE_ERROR, verdict.message
    (build,) = verdict.details["builds"]
    assert "into its build directory" in build["message"], build["message"]
    assert "build directory" in verdict.message, verdict.message


def test_a_library_built_in_triton_s_cache_is_no_launcher_on_the_cpu(build_cache):
    """own_build_in_triton_cache.py: the library above built in /tmp/triton with Triton imported passed the check
    (Triton's cache was excepted wherever Triton was imported): `correct` under --strict. Triton's launchers are
    excepted only where Triton can run (a GPU), torch.compile's libraries only as the worker's compile maps them."""
    verdict = _evaluate("own_build_in_triton_cache", build_cache, strict=True)
    assert verdict.status is Status.REJECTED, verdict.message
    assert "redteam33_hidden_in_triton" in verdict.message, verdict.message


def test_the_loader_s_list_of_libraries_is_a_runtime_lookup(build_cache):
    """phdr_lookup_of_torch_kernel.py: a host-built library walked `dl_iterate_phdr` to libtorch_cpu's symbol table,
    found `at::cpu::clamp_min` by its mangled name (a string literal) and called it through a pointer: no `dlsym`
    among its imports, no PyTorch call in its text, nothing dispatched: `correct` under --strict."""
    verdict = _evaluate("phdr_lookup_of_torch_kernel", build_cache, strict=True)
    assert verdict.status is Status.REJECTED, verdict.message
    assert "dl_iterate_phdr" in verdict.message, verdict.message


@pytest.mark.xfail(
    strict=True,
    reason="open: a host-built library that finds at::cpu::clamp_min by reading /proc/self/maps and libtorch_cpu.so's "
    "symbol table as plain files imports nothing, names nothing the scans read and dispatches nothing",
)
def test_a_kernel_found_by_reading_the_library_file_is_rejected_under_strict(build_cache):
    """elf_file_lookup_of_torch_kernel.py: `correct` under --strict; due: rejected (PyTorch's kernel does the work)."""
    verdict = _evaluate("elf_file_lookup_of_torch_kernel", build_cache, strict=True)
    assert verdict.status is Status.REJECTED, verdict.message


def test_an_unwinder_linked_in_is_named_in_the_loader_list_finding(tmp_path):
    """`-static-libgcc` (an allowed linker option) links libgcc's unwinder into the library, and it imports
    `_dl_find_object` (or `dl_iterate_phdr` on an older glibc): under --strict that is the loader-list lookup above,
    which nothing tells from the kernel's own use, so the finding names the flag to drop."""
    import shutil
    import subprocess

    from kevin_tui.evaluator.host.builds import kernels_called_past_the_dispatcher

    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no g++")
    source = tmp_path / "throws.cpp"
    source.write_text(
        '#include <stdexcept>\nextern "C" int f(int x) { if (x) throw std::runtime_error("x"); return 0; }\n'
    )
    library = tmp_path / "libthrows.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-static-libgcc", str(source), "-o", str(library)], check=True)
    found = [f for f in kernels_called_past_the_dispatcher(library) if "loader's list" in f]
    assert found and all("-static-libgcc" in f for f in found), kernels_called_past_the_dispatcher(library)
