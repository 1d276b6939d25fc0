"""The binding unit's object (main.o) is compiled once per set of declarations, then a checked copy of it
is linked (host/bindings.py): reused when only the kernel changes, rebuilt when the declarations do, and
never linked once it differs from the host's record."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host.bindings import OBJECT, BindingObjects, binding_key
from kevin_tui.evaluator.host.cache import Manifests
from tests.conftest import candidate
from tests.test_builds import needs_nvcc

SPEC = {
    "kind": "inline", "name": "ext", "cpp_sources": ["torch::Tensor f(torch::Tensor x);"], "functions": ["f"],
    "extra_cflags": ["-O2"], "extra_include_paths": [], "with_cuda": None, "no_implicit_headers": False,
    "cuda_sources": ["__global__ void k() {}"], "extra_cuda_cflags": ["-O3"], "extra_ldflags": [], "sources": [],
}  # fmt: skip
VERSIONS = {"torch": "2.x", "cuda": "13.0"}
RUN_EXTENSION = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("relu_split_binding", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
x = torch.randn(4096)
assert torch.equal(module.relu_forward(x), torch.relu(x)), "wrong result"
print("ok")
"""


def key_of(**changes: object) -> str:
    return binding_key({**SPEC, **changes}, True, "pch1", VERSIONS, {"CXX": "c++"})


def test_the_binding_key_changes_with_the_declarations_and_flags_but_not_the_kernel():
    same = key_of()
    assert key_of(cuda_sources=["__global__ void k2() {}"], extra_cuda_cflags=["-O2"], extra_ldflags=["-lm"]) == same
    for changed in ({"cpp_sources": ["torch::Tensor f(torch::Tensor x, int n);"]}, {"functions": ["f", "g"]},
                    {"name": "ext2"}, {"extra_cflags": ["-O3"]}, {"extra_include_paths": ["/opt/x"]},
                    {"no_implicit_headers": True}):  # fmt: skip
        assert key_of(**changed) != same, changed
    assert binding_key(SPEC, True, "pch2", VERSIONS, {}) != binding_key(SPEC, True, "pch1", VERSIONS, {})
    assert binding_key(SPEC, False, "pch1", VERSIONS, {}) != binding_key(SPEC, True, "pch1", VERSIONS, {})


def test_a_changed_recorded_object_is_never_handed_out(tmp_path):
    builds, manifests = tmp_path / "builds", Manifests(tmp_path / "manifests")
    entry = builds / f"ext-{'a' * 20}"
    entry.mkdir(parents=True)
    (entry / OBJECT).write_bytes(b"\x7fELF honest object" * 100)
    objects = BindingObjects(builds, manifests)
    objects.remember("k1", entry)
    assert (
        objects.provide("k1", tmp_path / "copy.o")
        and (tmp_path / "copy.o").read_bytes() == (entry / OBJECT).read_bytes()
    )
    (entry / OBJECT).write_bytes(b"\x7fELF poisoned object" * 100)  # same size would not help either: hashed
    assert not objects.provide("k1", tmp_path / "second.o")
    assert not (tmp_path / "second.o").exists()
    assert not objects.provide("k1", tmp_path / "third.o")  # the record is dropped: the next build compiles it
    assert not objects.provide("unknown", tmp_path / "fourth.o")


@needs_nvcc
@pytest.mark.nvcc
def test_same_declarations_reuse_the_binding_object_and_the_extension_still_works(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, cache_dir=build_cache, build_timeout_s=600)
    source = candidate("relu_split_binding.py")
    changed_loop = source.replace("#include <cstdint>", f"#include <cstdint>\n// turn {os.getpid()}-{time.time_ns()}")
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        first = evaluator.evaluate(source)  # compiles main.cpp (or found whole in the kept cache)
        second = evaluator.evaluate(changed_loop)
    assert first.status is Status.COMPILED and second.status is Status.COMPILED, second.message
    (build,) = second.details["builds"]
    assert not build["cached"] and build["binding"] == "reused"
    directory = Path(build["directory"])
    assert "main.o" not in (directory / ".ninja_log").read_text()  # linked, not compiled
    assert directory != Path(first.details["builds"][0]["directory"])
    run = subprocess.run([sys.executable, "-c", RUN_EXTENSION, str(directory / "relu_split_binding.so")],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]
