"""The builder: compiles one extension into the directory the host gives it, and never loads it.

It runs no candidate Python, only compilers on the candidate's sources with flags the host has
already checked and normalised; loading the library (and running its static initialisers) happens in
the candidate worker. It tries the light CUDA headers first (a failing light build falls back to the
standard headers, remembered per directory), and uses a precompiled torch/extension.h for g++, which
it sees read-only. When the host has put a checked `main.o` of the same binding unit into its directory
(host/bindings.py), it links that one instead of compiling main.cpp. nvcc runs through nvcc_parallel.py,
which runs nvcc's host and device passes side by side. The same role, asked for `pch`, is
the trusted step that makes such a header: it compiles only torch's header, into a fresh directory the
host then checks and stores.
"""

from __future__ import annotations

import glob
import re
import shlex
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.worker import nvcc_parallel
from kevin_tui.evaluator.worker.channel import Channel
from kevin_tui.evaluator.worker.common import EnvironmentProblem, log_stage, short_traceback
from kevin_tui.evaluator.worker.compiler_stream import run_ninja_streamed
from kevin_tui.evaluator.worker.light_headers import light_prelude, undefined_names, without_heavy_includes
from kevin_tui.evaluator.worker.pch import build_pch, pch_flags, pch_key


def require_cuda_toolchain() -> None:
    import torch
    from torch.utils import cpp_extension

    if torch.version.cuda is None:
        raise EnvironmentProblem(
            f"torch {torch.__version__} is a CPU-only build, so CUDA candidates cannot be built here; "
            "install a CUDA build of torch"
        )
    home = cpp_extension.CUDA_HOME
    if not home or not (Path(home) / "bin" / "nvcc").exists():
        raise EnvironmentProblem(f"nvcc not found (CUDA_HOME={home!r}); install the CUDA toolkit and set CUDA_HOME")


def wheel_cuda_dirs() -> tuple[list[str], list[str]]:
    """Include and library directories of the CUDA wheels in this Python environment (cuBLAS & co)."""
    site = sysconfig.get_path("purelib")
    roots = sorted(glob.glob(f"{site}/nvidia/cu*")) + sorted(glob.glob(f"{site}/nvidia/cublas"))
    return (
        [f"{r}/include" for r in roots if Path(r, "include").is_dir()],
        [f"{r}/lib" for r in roots if Path(r, "lib").is_dir()],
    )


def toolkit_fallbacks(spec: dict[str, Any]) -> None:
    """Headers and libraries (cuBLAS) the toolkit lacks but the environment's CUDA wheels have:
    searched after everything else, so they never shadow the toolkit's own."""
    from torch.utils import cpp_extension

    home = Path(cpp_extension.CUDA_HOME or "/nonexistent")
    includes, libs = wheel_cuda_dirs()
    if not (home / "include" / "cublas_v2.h").exists():
        spec["extra_cflags"] += [f"-idirafter{d}" for d in includes]
        spec["extra_cuda_cflags"] += [flag for d in includes for flag in ("-isystem", d)]
    lib_dir = home / "lib64"
    for name in ("cublas", "cublasLt"):
        if f"-l{name}" in spec["extra_ldflags"] and not (lib_dir / f"lib{name}.so").exists():
            for directory in libs:
                versioned = sorted(Path(directory).glob(f"lib{name}.so.*"))
                if versioned:
                    ldflags = spec["extra_ldflags"]
                    ldflags[ldflags.index(f"-l{name}")] = f"-l:{versioned[0].name}"
                    ldflags.append(f"-L{directory}")
                    break


def _forget_version(name: str) -> None:
    """Stop torch renaming a rebuilt extension `name_v1` (it versions by name within a process)."""
    from torch.utils import cpp_extension

    entries = getattr(getattr(cpp_extension, "JIT_EXTENSION_VERSIONER", None), "entries", None)
    if isinstance(entries, dict):
        entries.pop(name, None)


def _compile_only() -> None:
    """torch's JIT build ends by importing the library; the builder must not run its initialisers. Its
    ninja step streams the compiler's output into the log as it is printed (compiler_stream.py)."""
    from torch.utils import cpp_extension

    cpp_extension._import_module_from_library = lambda *args, **kwargs: None
    cpp_extension._run_ninja_build = run_ninja_streamed


BINDING_COMPILE = re.compile(r"^build main\.o: compile .*\n", re.M)


def _link_given_binding() -> None:
    """Make torch's ninja run link the main.o the host copied in rather than compile main.cpp: the
    compile statement is dropped from build.ninja (if torch ever writes it otherwise, ninja compiles it
    as before, which is slower but the same)."""
    from torch.utils import cpp_extension

    run_ninja = cpp_extension._run_ninja_build

    def without_binding_compile(build_directory: str, verbose: bool, error_prefix: str) -> None:
        ninja = Path(build_directory) / "build.ninja"
        ninja.write_text(BINDING_COMPILE.sub("", ninja.read_text()))
        run_ninja(build_directory, verbose, error_prefix)

    cpp_extension._run_ninja_build = without_binding_compile


NVCC_LINE = re.compile(r"^nvcc = (.+)$", re.M)


def _nvcc_in_parallel() -> None:
    """Make torch's ninja run compile .cu files through nvcc_parallel.py, which runs nvcc's own host and
    device steps side by side (the same machine code; plain nvcc on anything unexpected)."""
    from torch.utils import cpp_extension

    run_ninja = cpp_extension._run_ninja_build
    driver = f"{shlex.quote(sys.executable)} {shlex.quote(nvcc_parallel.__file__)}"

    def with_driver(build_directory: str, verbose: bool, error_prefix: str) -> None:
        ninja = Path(build_directory) / "build.ninja"
        ninja.write_text(NVCC_LINE.sub(lambda m: f"nvcc = {driver} {m[1]}", ninja.read_text(), count=1))
        run_ninja(build_directory, verbose, error_prefix)

    cpp_extension._run_ninja_build = with_driver


class Builder:
    def __init__(self, request: dict[str, Any]) -> None:
        self.spec = request["spec"]
        self.directory = Path(request["directory"])
        self.pch_store, self.pch_key = Path(request["pch_store"]), request["pch_key"]
        self.binding_given = bool(request.get("binding_object")) and (self.directory / "main.o").is_file()
        self.headers = "standard"
        self.prelude_lines = 0  # a light build's cuda.cu: the prelude's lines before the candidate's sources

    def common_kwargs(self, cpp_flags: list[str]) -> dict[str, Any]:
        spec = self.spec
        return {
            "extra_cflags": cpp_flags,
            # line tables only (the machine code is the same): a compute-sanitizer finding names the source line
            "extra_cuda_cflags": [*spec["extra_cuda_cflags"], "-lineinfo"],
            "extra_ldflags": spec["extra_ldflags"],
            "extra_include_paths": spec["extra_include_paths"],
            "build_directory": str(self.directory),
            "verbose": False,  # keep compiler output in the exception, where we parse it
            "with_cuda": spec["with_cuda"],
        }

    def build(self) -> None:
        from torch.utils import cpp_extension

        spec = self.spec
        cuda = bool(spec["cuda_sources"]) or any(name.endswith(".cu") for name, _ in spec["sources"])
        if cuda:
            require_cuda_toolchain()
            toolkit_fallbacks(spec)
        _compile_only()
        if cuda:
            _nvcc_in_parallel()
        if self.binding_given:
            _link_given_binding()
        implicit = not spec["no_implicit_headers"]
        flags = list(spec["extra_cflags"])
        log_stage(f"build {spec['name']}: {'nvcc and ' if cuda else ''}g++ {' '.join(flags)}".rstrip())
        if implicit or spec["kind"] == "files":
            flags = pch_flags(self.pch_store, self.pch_key) + flags
        log_stage("compiling and linking (the compiler's output follows as it prints it)")
        if spec["kind"] == "files":
            source_dir = self.directory / "sources"
            source_dir.mkdir(exist_ok=True)
            paths = []
            for name, text in spec["sources"]:
                (source_dir / name).write_text(text)
                paths.append(str(source_dir / name))
            cpp_extension.load(spec["name"], paths, **self.common_kwargs(flags))
            return
        prelude = light_prelude(spec["cuda_sources"]) if spec["cuda_sources"] and implicit else None
        if prelude:
            light_cpp = ["#include <torch/extension.h>", *spec["cpp_sources"]]
            light_cuda = [prelude, *(without_heavy_includes(s) for s in spec["cuda_sources"])]
            self.prelude_lines = prelude.count("\n") + 1
            try:
                self._inline(light_cpp, light_cuda, flags, no_implicit_headers=True)
            except Exception as exc:
                if not is_build_failure(exc):
                    raise
                if undefined_names(str(exc)):  # the candidate's own error: the standard headers would fail too
                    self.headers = "light"
                    raise
                _forget_version(spec["name"])
                log_stage("the light CUDA headers failed: building again with the standard ones")
            else:
                self.headers = "light"
                return
        self._inline(spec["cpp_sources"], spec["cuda_sources"] or None, flags, spec["no_implicit_headers"])

    def _inline(self, cpp: list[str], cuda: list[str] | None, flags: list[str], no_implicit_headers: bool) -> None:
        from torch.utils import cpp_extension

        cpp_extension.load_inline(
            self.spec["name"], cpp, cuda, functions=self.spec["functions"],
            no_implicit_headers=no_implicit_headers, **self.common_kwargs(flags),
        )  # fmt: skip


BUILD_FAILURE_MARKERS = ("Error building extension", "Error compiling objects", "ninja: build stopped")


def is_build_failure(exc: BaseException) -> bool:
    return any(marker in str(exc) for marker in BUILD_FAILURE_MARKERS)


def make_pch(request: dict[str, Any], channel: Channel) -> None:
    """The trusted header step: say which header these flags need, and make it when the host asks."""
    key = pch_key(request["extra_cflags"], request["include_paths"])
    channel.emit("pch_key", key=key)
    if key and channel.expect("pch_build"):
        message = build_pch(Path(request["directory"]), request["extra_cflags"], request["include_paths"])
        channel.emit("pch_built", message=message)


def run_builder(request: dict[str, Any], channel: Channel) -> None:
    if request["cmd"] == "pch":
        make_pch(request, channel)
        return
    builder = Builder(request)
    started = time.perf_counter()
    try:
        builder.build()
    except EnvironmentProblem:
        raise
    except Exception as exc:
        text = str(exc)
        if not is_build_failure(exc):
            text = f"{type(exc).__name__}: {text}\n{short_traceback(exc)}"
        lines = builder.prelude_lines if builder.headers == "light" else 0
        channel.emit("build_failed", message=text[-200:], log=text[-20000:], headers=builder.headers,
                     prelude_lines=lines)  # fmt: skip
        return
    print(f"built in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    channel.emit("built", directory=str(builder.directory), headers=builder.headers,
                 seconds=round(time.perf_counter() - started, 3))  # fmt: skip
