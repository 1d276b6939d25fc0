"""Real builds: g++ through load_inline judged on the CPU, nvcc builds checked there too (`compiled` where a
missing GPU explains the failure).

Each extension is compiled once per run (session build cache, kept between runs by CI), except in the one
cold test; the slow nvcc tests are marked `nvcc` and need the CUDA toolkit (not a GPU).
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from kevin_tui.evaluator import EvalOptions, Evaluator, Status, Verdict
from kevin_tui.evaluator.host import builds
from kevin_tui.evaluator.host.builds import FlagRefused, normalise_flags
from kevin_tui.evaluator.host.sandbox import Bind, worker_env
from tests.conftest import CANDIDATES, candidate, gone_within, processes_with

NVCC_AVAILABLE = Path(worker_env().get("CUDA_HOME", "/nonexistent"), "bin", "nvcc").exists()
needs_nvcc = pytest.mark.skipif(not NVCC_AVAILABLE, reason="needs the CUDA toolkit (nvcc)")


@pytest.fixture(scope="module")
def relu_cpu(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, cache_dir=build_cache, build_timeout_s=600)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


def build_dirs(verdict) -> list[Path]:
    return [Path(b["directory"]) for b in verdict.details.get("builds", [])]


@dataclass
class ColdRun:
    cache: Path
    cold: Verdict
    attack: Verdict
    headers: dict[Path, str]  # every stored header's text, as the attack left it
    warm: Verdict
    library: Path
    poisoned: bytes
    again: Verdict
    seen: list[tuple[str, list[Bind]]]  # every worker's scratch name and binds


@pytest.fixture(scope="module")
def cold_run(relu_problem, tmp_path_factory) -> ColdRun:
    """The one deliberately cold build (the others share a build cache that CI keeps between runs), in a
    cache of its own, every worker its evaluator starts recorded with its binds: an honest C++ kernel built
    from nothing (the trusted step makes its precompiled header, a builder the extension); the newline-flag
    attack on those headers; the kernel again (found in the cache); then its library changed (what a
    poisoned entry looks like: no test beside it loads this cache) and the kernel judged once more, so a
    builder really compiles it again with the headers the attack left."""
    seen: list[tuple[str, list[Bind]]] = []

    class Recorded(builds.WorkerProcess):
        def __init__(self, role, scratch, env, sandbox, binds, limits, prefix=()):
            seen.append((scratch.name, list(binds)))
            super().__init__(role, scratch, env, sandbox, binds, limits, prefix)

    cache = tmp_path_factory.mktemp("cold") / "cold-cache"
    options = EvalOptions(device="cpu", timing=False, cache_dir=cache, build_timeout_s=600)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(builds, "WorkerProcess", Recorded)
        with Evaluator(relu_problem, options, prespawn=False) as evaluator:
            cold = evaluator.evaluate(candidate("relu_cpp.py"))
            assert cold.status is Status.CORRECT, cold.message  # what follows needs its build
            attack = evaluator.evaluate((CANDIDATES / "trust3" / "pch_poison_newline_flag.py").read_text())
            headers = {h: h.read_text() for h in sorted((cache / "pch").glob("*/torch_extension_pch.h"))}
            warm = evaluator.evaluate(candidate("relu_cpp.py"))
            library = Path(cold.details["builds"][0]["directory"]) / "relu_ext.so"
            poisoned = library.read_bytes()[:-16] + b"\0" * 16
            library.write_bytes(poisoned)
            again = evaluator.evaluate(candidate("relu_cpp.py"))
    return ColdRun(cache, cold, attack, headers, warm, library, poisoned, again, seen)


def test_cpp_candidate_built_cold_with_gpp_is_correct_and_reused(cold_run):
    """Headers precompiled, extension compiled, then found in the cache; its changed library is never
    loaded again, but rebuilt."""
    cold, warm, again = cold_run.cold, cold_run.warm, cold_run.again
    assert warm.status is Status.CORRECT
    (cold_build,), (warm_build,) = cold.details["builds"], warm.details["builds"]
    assert cold_build["directory"] == warm_build["directory"] and not cold_build["cached"]
    assert warm_build["cached"] and warm.phases_s["build"] < cold.phases_s["build"]
    assert again.status is Status.CORRECT, again.message
    (build,) = again.details["builds"]
    assert not build["cached"]  # the altered library was refused and rebuilt, not loaded
    assert cold_run.library.read_bytes() != cold_run.poisoned


def test_a_newline_flag_cannot_poison_the_precompiled_headers(cold_run):
    """(trust3) The attack's flag is refused; the headers it meant to overwrite are as the trusted step
    made them, and the next build with those flags compiles with them and is correct."""
    attack, again = cold_run.attack, cold_run.again
    assert attack.status is Status.COMPILE_ERROR and "control character" in attack.message, attack.message
    assert cold_run.headers and all(text == "#include <torch/extension.h>\n" for text in cold_run.headers.values())
    assert again.status is Status.CORRECT and not again.details["builds"][0]["cached"], again.message
    ninja = (Path(again.details["builds"][0]["directory"]) / "build.ninja").read_text()
    assert any(f"-include {header} " in ninja for header in cold_run.headers), ninja  # built with the header


def test_the_precompiled_headers_are_read_only_to_every_builder(cold_run):
    """(trust3) Whatever a build does, the header store is not its to write: every builder sees it
    read-only, and the trusted step that makes a header writes only a fresh directory of its own, which the
    host records."""
    store = str(cold_run.cache / "pch")
    for name, binds in cold_run.seen:
        writable = [b.path for b in binds if b.writable]
        assert not any(path == store or path.startswith(store + "/") for path in writable), (name, writable)
    builder = [binds for name, binds in cold_run.seen if name.startswith("builder-")]
    assert builder and any(b.path == store and not b.writable for b in builder[0])
    assert any(name.startswith("pch-") for name, _ in cold_run.seen)  # the trusted step made the header here
    assert list((cold_run.cache / "manifests").glob("pch-*.json"))  # recorded by the host, outside every sandbox


def test_same_extension_name_with_other_source_never_collides(relu_cpu):
    wrong = relu_cpu.evaluate(candidate("relu_cpp_wrong.py"))
    assert wrong.status is Status.INCORRECT, wrong.message
    right = relu_cpu.evaluate(candidate("relu_cpp.py"))
    assert right.status is Status.CORRECT
    assert build_dirs(wrong) != build_dirs(right)
    assert all(d.name.startswith("relu_ext-") for d in build_dirs(wrong) + build_dirs(right))


def test_empty_and_repeated_flags_are_dropped_and_dangerous_ones_refused():
    assert normalise_flags(["", "-O2", " ", "-O3", "-O2"]) == ["-O3", "-O2"]
    assert normalise_flags(["-gencode", "arch=a", "-gencode", "arch=b"]) == ["-gencode", "arch=a", "-gencode", "arch=b"]
    for flag in (["-wrapper", "sh,-c,id"], ["-fplugin=/tmp/x.so"], ["-B/tmp"], ["-o", "/x"], ["-Xcompiler", "-fplugin=x"],
                 ["--compiler-bindir=/tmp"], ["-Wl,-plugin,/x.so"], ["@/tmp/args"]):  # fmt: skip
        with pytest.raises(FlagRefused):
            normalise_flags(flag)


def test_an_empty_flag_builds_at_once_and_shares_the_build(relu_cpu):
    source = candidate("relu_cpp.py")
    plain = relu_cpu.evaluate(source)
    padded = relu_cpu.evaluate(source.replace('extra_cflags=["-O2"]', 'extra_cflags=["", "-O2", ""]'))
    assert padded.status is Status.CORRECT, padded.message
    assert build_dirs(plain) == build_dirs(padded) and padded.details["builds"][0]["cached"]


def unique(source: str) -> str:
    """`source` with its C++ changed by a comment of this run's own: built afresh, whatever the kept cache holds."""
    return source.replace(
        "torch::Tensor relu_forward", f"// run {os.getpid()}-{time.time_ns()}\ntorch::Tensor relu_forward"
    )


def test_a_build_failure_the_candidate_swallows_is_still_a_compile_error(relu_cpu):
    verdict = relu_cpu.evaluate(unique(candidate("fallback_hides_failed_build.py")))  # a builder runs: its log
    assert verdict.status is Status.COMPILE_ERROR, verdict.message
    assert "fallback hid this" in verdict.message and "undeclared_name" in verdict.message
    assert verdict.details["compiler_errors"][0]["candidate_line"] is not None
    # the compiler's own lines reached the builder's log as it printed them, stamped (the app tails it)
    logs = [log.read_text() for log in relu_cpu.scratch.glob("builder-*/builder.log")]
    assert any(re.search(r"(?m)^\[\s*\d+\.\d s\] \| .*error: .*undeclared_name", text) for text in logs), logs


def test_a_compiler_error_is_remembered_and_given_again_at_once(relu_cpu):
    """The same sources, flags and toolchain fail the same way: evaluated again (a retry, a replay, the same
    mistake next turn), a kernel that does not compile gets the compiler's errors, mapped to its lines as the
    first time, without a builder (host/failed_builds.py)."""
    source = unique(candidate("fallback_hides_failed_build.py"))
    first = relu_cpu.evaluate(source)
    builders = len(list(relu_cpu.scratch.glob("builder-*")))
    again = relu_cpu.evaluate(source)
    assert first.status is again.status is Status.COMPILE_ERROR and again.message == first.message, again.message
    assert again.details["compiler_errors"] == first.details["compiler_errors"]
    (built,), (recalled,) = first.details["builds"], again.details["builds"]
    assert not built["cached"] and recalled["cached"] and not recalled["ok"] and recalled["headers"] == built["headers"]
    assert len(list(relu_cpu.scratch.glob("builder-*"))) == builders  # no builder started
    assert again.phases_s["build"] < first.phases_s["build"] / 5


def test_only_the_compilers_own_errors_are_remembered_and_a_new_compiler_forgets_them(tmp_path):
    """A missing header or library (the user may install it), a compiler killed or out of memory, a builder
    that failed by itself: built again next time. A changed compiler binary forgets what the old one said."""
    from kevin_tui.evaluator.host.failed_builds import FailedBuilds

    failed = (
        "x.cpp:3:5: error: 'undeclared_name' was not declared in this scope\nninja: build stopped: subcommand failed."
    )
    unstable = [
        "x.cpp:1:10: fatal error: cutlass/cutlass.h: No such file or directory\nninja: build stopped: subcommand failed.",
        "c++: fatal error: Killed signal terminated program cc1plus\nninja: build stopped: subcommand failed.",
        "/usr/bin/ld: cannot find -lcublasLt\nninja: build stopped: subcommand failed.",
        "RuntimeError: the builder's own failure\nTraceback ...",
    ]
    compiler = tmp_path / "bin" / "nvcc"
    compiler.parent.mkdir()
    compiler.write_bytes(b"one")
    env = {"CUDA_HOME": str(tmp_path), "PATH": ""}
    memory = FailedBuilds(tmp_path, env)
    record = {"message": "error", "headers": "light", "prelude_lines": 7}
    memory.remember("relu-1", {**record, "log": failed})
    for number, log in enumerate(unstable):
        memory.remember(f"other-{number}", {**record, "log": log})
    assert memory.recall("relu-1") == {**record, "log": failed, "toolchain": memory.toolchain}
    assert all(memory.recall(f"other-{number}") is None for number in range(len(unstable)))
    (tmp_path / "failed-relu-2.json").write_text('{"log": 3}')  # not one the host wrote: no memory
    assert memory.recall("relu-2") is None
    compiler.write_bytes(b"another nvcc")
    assert FailedBuilds(tmp_path, env).recall("relu-1") is None


def test_the_header_for_flags_seen_before_is_found_without_a_worker(tmp_path, monkeypatch):
    """Which precompiled header some C++ flags need is the trusted step's answer, a worker start (~2 s of
    each build, more under load): the host asks once per set of flags, for every evaluator of the process
    on that cache (each problem of a batch run), and again once that header no longer matches its record,
    or for another worker environment. (The step itself is stubbed: whether the store admits a real header
    depends on what else the cache holds.)"""
    from kevin_tui.evaluator.host.sandbox import Limits, choose

    asked: list[tuple[str, list[str]]] = []
    recorded = {"ok": True}

    def broker(env: dict[str, str]) -> builds.BuildBroker:
        made = builds.BuildBroker(tmp_path / "builds", choose("off"), env, Limits(), tmp_path / "scratch")

        def step(spec, deadline):
            asked.append((env.get("CXX", ""), spec["extra_cflags"]))
            return "0123456789abcdef0123"

        monkeypatch.setattr(made, "_make_precompiled_header", step)
        return made

    monkeypatch.setattr(builds, "usable_pch", lambda store, key, manifests: recorded["ok"])
    spec = {"kind": "inline", "no_implicit_headers": False, "extra_cflags": ["-O2"], "extra_include_paths": []}
    one = broker({})
    first = one.precompiled_header(spec, time.monotonic() + 60)
    again = one.precompiled_header(dict(spec), time.monotonic() + 60)
    other = one.precompiled_header({**spec, "extra_cflags": ["-O3"]}, time.monotonic() + 60)
    later = broker({}).precompiled_header(dict(spec), time.monotonic() + 60)  # the next evaluator of the process
    assert first == again == other == later == "0123456789abcdef0123" and asked == [("", ["-O2"]), ("", ["-O3"])]
    broker({"CXX": "clang++"}).precompiled_header(dict(spec), time.monotonic() + 60)
    assert asked[-1] == ("clang++", ["-O2"])  # another compiler: asked again
    recorded["ok"] = False  # the header changed or was evicted: ask the trusted step again
    one.precompiled_header(dict(spec), time.monotonic() + 60)
    assert asked == [("", ["-O2"]), ("", ["-O3"]), ("clang++", ["-O2"]), ("", ["-O2"])]


def test_a_flag_that_runs_programs_is_refused_as_a_compile_error(relu_cpu):
    verdict = relu_cpu.evaluate(
        candidate("relu_cpp.py").replace('extra_cflags=["-O2"]', 'extra_cflags=["-wrapper", "sh,-c,touch /tmp/pwned"]')
    )
    assert verdict.status is Status.COMPILE_ERROR and "not allowed" in verdict.message


@needs_nvcc
@pytest.mark.nvcc
def test_cuda_candidate_is_built_for_real_and_judged_compiled_without_a_device(relu_cpu):
    verdict = relu_cpu.evaluate(candidate("relu_cuda.py"))
    assert verdict.status is Status.COMPILED, verdict.message
    assert verdict.exit_code == 3
    assert "Expected x.is_cuda()" in verdict.message  # its forward ran and failed as CUDA code without a device does
    (build,) = verdict.details["builds"]
    assert build["uses_cuda"] and (Path(build["directory"]) / "relu_cuda_ext.so").exists()
    assert build["headers"] == "light"  # built with the light CUDA prelude


@needs_nvcc
@pytest.mark.nvcc
def test_a_kernel_with_dispatch_guard_stream_and_launch_check_builds_with_the_light_headers(relu_cpu):
    """The form most generated kernels take (AT_DISPATCH, CUDAGuard, getCurrentCUDAStream,
    C10_CUDA_KERNEL_LAUNCH_CHECK) needs four more torch headers (Dispatch.h, which the prelude adds, and the three
    it includes itself), none of which includes an op header again, so
    the light prelude keeps its copies of the op headers and builds it at once (no fallback to the standard
    headers, which would take another ~40 s)."""
    verdict = relu_cpu.evaluate((CANDIDATES / "realpattern" / "dispatch_stream_guard_cuda.py").read_text())
    assert verdict.status is Status.COMPILED, verdict.message
    assert "x must be a CUDA tensor" in verdict.message
    (build,) = verdict.details["builds"]
    assert build["headers"] == "light" and build["ok"], build


@needs_nvcc
@pytest.mark.nvcc
def test_without_a_gpu_a_cuda_build_is_checked_and_compiled_only_where_a_missing_gpu_explains_the_failure(relu_cpu):
    """One nvcc build (a ReLU kernel whose launch is unchecked), three candidates: forward returning zeros without
    calling it is `incorrect` (it was `compiled`, ranked above every honestly wrong candidate); forward calling it,
    as a Python function or as the operator its library registers, gets the unwritten output an honest CUDA kernel
    leaves without a GPU, and is `compiled`, never `incorrect`."""
    wrong = relu_cpu.evaluate(candidate("redteam9/unused_cuda_build_hides_a_wrong_answer.py"))
    assert wrong.status is Status.INCORRECT, wrong.message
    assert wrong.details["builds"][0]["uses_cuda"]
    for honest in ("honest_unchecked_cuda_launch.py", "honest_unchecked_cuda_op.py"):
        verdict = relu_cpu.evaluate(candidate(f"redteam9/{honest}"))
        assert verdict.status is Status.COMPILED, f"{honest}: {verdict.message}"
        assert "called its nvcc-built code" in verdict.message and verdict.details["without_device"]


@needs_nvcc
@pytest.mark.nvcc
def test_a_cuda_build_on_a_cpu_evaluation_without_nvcc_is_that_candidates_compile_error(
    relu_problem, build_cache, tmp_path, monkeypatch
):
    """Without the CUDA toolkit, a candidate asking for an nvcc build on a CPU evaluation is its own
    `compile_error`, saying why and what to do; it stopped the whole evaluation before (exit 4 "cannot evaluate
    here"), so one candidate's choice of CUDA ended every problem of a CPU batch run. A C++ candidate in the
    same evaluator is still judged."""
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda-toolkit"))
    options = EvalOptions(device="cpu", timing=False, cache_dir=build_cache, build_timeout_s=600)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        unbuilt = f"// never built before: {os.urandom(8).hex()}\n"  # so the builder runs (a cached library loads)
        cuda = evaluator.evaluate(
            candidate("relu_cuda.py").replace('relu_cuda_source = """', 'relu_cuda_source = """' + unbuilt)
        )
        cpp = evaluator.evaluate(candidate("relu_cpp.py"))
    assert cuda.status is Status.COMPILE_ERROR, cuda.message
    assert cuda.details["finding"] == "cannot_build_here"
    assert "cannot build CUDA" in cuda.message and "nvcc not found" in cuda.message and "C++" in cuda.message
    assert cpp.status is Status.CORRECT, cpp.message


def test_cuda_compile_error_carries_nvcc_message_and_candidate_line(relu_cpu):
    verdict = relu_cpu.evaluate(candidate("relu_cuda_broken.py"))
    assert verdict.status is Status.COMPILE_ERROR, verdict.message
    first = verdict.details["compiler_errors"][0]
    assert first["file"] == "cuda.cu" and "undefined_bias" in first["message"]
    assert first["candidate_line"] == 11
    assert "undefined_bias" in verdict.message
    # no header defines undefined_bias: the candidate's own error, so the standard headers were not tried
    # (they would fail the same way); a failed build leaves no library in the cache
    (build,) = verdict.details["builds"]
    assert build["headers"] == "light" and not build["ok"]
    assert not Path(build["directory"]).exists()


@needs_nvcc
@pytest.mark.nvcc
def test_same_declarations_link_the_earlier_binding_object_and_the_extension_still_works(relu_cpu):
    """Only the loop (host C++ in cuda_sources) changes: main.cpp's object is a checked copy of the first
    build's, linked rather than compiled (host/bindings.py), and the library computes ReLU."""
    source = candidate("relu_split_binding.py")
    changed_loop = source.replace("#include <cstdint>", f"#include <cstdint>\n// turn {os.getpid()}-{time.time_ns()}")
    first = relu_cpu.evaluate(source)  # compiles main.cpp (or is found whole in the kept build cache)
    second = relu_cpu.evaluate(changed_loop)
    # its loop is host code: it runs on the CPU, is checked there and is correct
    assert first.status is Status.CORRECT and second.status is Status.CORRECT, second.message
    assert [w.code for w in second.warnings] == ["cuda_not_run"]
    (build,) = second.details["builds"]
    assert not build["cached"] and build["binding"] == "reused"
    directory = Path(build["directory"])
    assert "main.o" not in (directory / ".ninja_log").read_text()  # linked, not compiled
    spec = importlib.util.spec_from_file_location("relu_split_binding", directory / "relu_split_binding.so")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(4096)
    assert torch.equal(module.relu_forward(x), torch.relu(x))


@needs_nvcc
@pytest.mark.nvcc
def test_build_timeout_kills_nvcc_and_ninja(relu_problem, build_cache):
    # slow to build on purpose (ptxas on a loop of 8192 unrolled sines), well past the limit: relying on nvcc's own
    # time to pass 8 s failed once our builds took under 6 s
    slow = "__global__ void slow_to_build(float* x) {\n#pragma unroll\n"
    slow += "    for (int i = 0; i < 8192; ++i) x[i] = sinf(x[i]) * x[(i * 7) % 8192];\n}\n"
    unique = candidate("relu_cuda.py").replace("relu_cuda_ext", "relu_timeout_probe")
    unique = unique.replace("__global__", f"// {os.getpid()} {id(unique)}\n{slow}__global__", 1)
    options = EvalOptions(device="cpu", timing=False, cache_dir=build_cache, build_timeout_s=4)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate(unique)
    assert verdict.status is Status.TIMEOUT and "build phase" in verdict.message
    # killed at once, reaped on a thread (the caller does not wait): gone within a few seconds
    survivors = "" if gone_within("relu_timeout_probe", 10) else processes_with("relu_timeout_probe")
    assert not survivors, f"build processes survived: {survivors}"


def test_prebuild_builds_candidates_in_parallel_then_evaluation_finds_them_built(relu_cpu):
    sources = [candidate("relu_cpp.py").replace("relu_ext", f"relu_prebuilt_{i}") for i in range(2)]
    started = time.monotonic()
    relu_cpu.prebuild(sources, parallel=2)
    prebuild_s = time.monotonic() - started
    verdicts = [relu_cpu.evaluate(source) for source in sources]
    assert all(v.status is Status.CORRECT for v in verdicts), [v.message for v in verdicts]
    assert all(v.details["builds"][0]["cached"] for v in verdicts)
    assert prebuild_s < 600
