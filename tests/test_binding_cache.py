"""The binding unit's object (main.o) is keyed by what goes into it, so changed declarations compile it
again, and a copy that differs from the host's record is never handed out (host/bindings.py). The real
build that links a reused one is in test_builds.py (it shares that module's evaluator)."""

from __future__ import annotations

from kevin_tui.evaluator.host.bindings import OBJECT, BindingObjects, binding_key, reusable
from kevin_tui.evaluator.host.cache import Manifests

SPEC = {
    "kind": "inline", "name": "ext", "cpp_sources": ["torch::Tensor f(torch::Tensor x);"], "functions": ["f"],
    "extra_cflags": ["-O2"], "extra_include_paths": [], "with_cuda": None, "no_implicit_headers": False,
    "cuda_sources": ["__global__ void k() {}"], "extra_cuda_cflags": ["-O3"], "extra_ldflags": [], "sources": [],
}  # fmt: skip
VERSIONS = {"torch": "2.x", "cuda": "13.0"}


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


def test_a_main_cpp_that_could_read_a_file_outside_the_key_is_never_reused():
    """The CUDA sources are not in the key: a main.cpp that includes cuda.cu (quoted, by macro, through a
    digraph, a spliced line, __has_include) would link an earlier candidate's kernel under a later one's."""
    plain = [
        "#include <torch/extension.h>\n#include <vector>\n#include <cuda_runtime.h>\ntorch::Tensor f(torch::Tensor x);"
    ]
    assert reusable({**SPEC, "cpp_sources": plain})
    assert reusable(SPEC)
    sneaky = [
        '#include "cuda.cu"', "#define K <cuda.cu>\n#include K", "#include <cuda.cu>", '%:include "cuda.cu"',
        '#inc\\\nlude "cuda.cu"', '#/**/include "cuda.cu"', '#if __has_include("cuda.cu")\n#endif',
        '#import "cuda.cu"', "#include <../x.h>", '??=include "cuda.cu"', '#include_next "cuda.cu"',
    ]  # fmt: skip
    for source in sneaky:
        assert not reusable({**SPEC, "cpp_sources": [source]}), source
    for flags in (["-I/tmp"], ["-include", "cuda.cu"], ["-iquote."], ["@flags.txt"]):
        assert not reusable({**SPEC, "extra_cflags": flags}), flags
    assert not reusable({**SPEC, "extra_include_paths": ["/tmp"]})
