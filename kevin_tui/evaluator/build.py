"""Content-addressed builds for load_inline (runs inside the candidate worker).

Every candidate calls its extension something like `elementwise_add`, so torch's
default directory (keyed by name) would make candidates overwrite each other.
Here the directory is keyed by a hash of everything that changes the binary,
so an identical source reuses its build and different ones never collide.

Older torch guards a build with a `lock` file that a killed build leaves
behind, and a later build then waits on it forever (newer torch uses flock).
We hold our own flock (released by the kernel when the holder dies) while
building, so any `lock` file found while we hold it is stale and is removed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.compiler_output import GeneratedFile
from kevin_tui.evaluator.light_headers import light_prelude, without_heavy_includes
from kevin_tui.evaluator.pch import pch_flags

CPP_HEADER_LINES = 1  # '#include <torch/extension.h>'
CUDA_HEADER_LINES = 3  # torch/types.h, cuda.h, cuda_runtime.h


BUILD_FAILURE_MARKERS = ("Error building extension", "Error compiling objects", "ninja: build stopped")


def is_build_failure(exc: BaseException) -> bool:
    """True when `exc` came from compiling, linking or loading an extension."""
    text = str(exc)
    return any(m in text for m in BUILD_FAILURE_MARKERS) or (isinstance(exc, ImportError) and ".so" in text)


def _forget_version(name: str) -> None:
    """Stop torch renaming a rebuilt extension `name_v1` (it versions by name within a process)."""
    from torch.utils import cpp_extension

    entries = getattr(getattr(cpp_extension, "JIT_EXTENSION_VERSIONER", None), "entries", None)
    if isinstance(entries, dict):
        entries.pop(name, None)


class EnvironmentProblem(Exception):
    """This machine cannot build the candidate (CPU-only torch, no nvcc): not the candidate's fault."""


@dataclass
class BuildRecord:
    name: str
    directory: str
    uses_cuda: bool
    cached: bool
    seconds: float = 0.0
    headers: str = "standard"
    files: dict[str, GeneratedFile] = field(default_factory=dict)


def _as_list(sources: Any) -> list[str]:
    if sources is None:
        return []
    return [sources] if isinstance(sources, str) else list(sources)


def build_key(payload: dict[str, Any]) -> str:
    import torch

    payload = {
        **payload,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "arch": os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
        "python": sys.version_info[:2],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


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


class BuildTracker:
    """Wraps torch.utils.cpp_extension.load_inline for every build a candidate makes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.records: list[BuildRecord] = []

    @property
    def uses_cuda(self) -> bool:
        return any(r.uses_cuda for r in self.records)

    def install(self) -> None:
        from torch.utils import cpp_extension

        original = cpp_extension.load_inline

        def load_inline(name, cpp_sources, cuda_sources=None, *args, **kwargs):
            return self._load_inline(original, name, cpp_sources, cuda_sources, args, kwargs)

        load_inline.__doc__ = original.__doc__
        cpp_extension.load_inline = load_inline

    def _load_inline(self, original, name, cpp_sources, cuda_sources, args, kwargs):
        cpp = _as_list(cpp_sources)
        cuda = _as_list(cuda_sources)
        if cuda:
            require_cuda_toolchain()
        kwargs.pop("build_directory", None)
        kwargs["verbose"] = False  # keep compiler output in the exception, where we parse it
        flag_view = {k: v for k, v in kwargs.items() if k != "verbose"}
        key = build_key({"name": name, "cpp": cpp, "cuda": cuda, "args": args, "kw": flag_view})
        directory = self.root / f"{name}-{key[:20]}"
        directory.mkdir(parents=True, exist_ok=True)
        implicit = not kwargs.get("no_implicit_headers", False)
        files = {"main.cpp": GeneratedFile(CPP_HEADER_LINES if implicit else 0, cpp)}
        if cuda:
            files["cuda.cu"] = GeneratedFile(CUDA_HEADER_LINES if implicit else 0, cuda)
        record = BuildRecord(name, str(directory), bool(cuda), cached=(directory / f"{name}.so").exists())
        record.files = files
        self.records.append(record)
        start = time.perf_counter()
        with open(directory / ".kevin-build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            stale = directory / "lock"
            if stale.exists():
                stale.unlink()
            if implicit and len(args) < 3:  # extra_cflags not passed positionally
                extra = _as_list(kwargs.get("extra_cflags"))
                includes = _as_list(kwargs.get("extra_include_paths"))
                kwargs["extra_cflags"] = pch_flags(self.root.parent, extra, includes) + extra
            try:
                return self._build(original, record, directory, cpp, cuda, implicit, args, kwargs)
            finally:
                record.seconds = time.perf_counter() - start

    def _build(self, original, record, directory, cpp, cuda, implicit, args, kwargs):
        """Try the light CUDA headers first (remembered per build directory), then the standard ones."""
        name = record.name
        mode = directory / ".kevin-headers"
        prelude = light_prelude(cuda) if cuda and implicit else None
        if prelude and not (mode.exists() and mode.read_text() == "standard"):
            light_cpp = ["#include <torch/extension.h>", *cpp]
            light_cuda = [prelude, *(without_heavy_includes(s) for s in cuda)]
            light_kwargs = {**kwargs, "no_implicit_headers": True}
            try:
                module = original(name, light_cpp, light_cuda, *args, build_directory=str(directory), **light_kwargs)
            except Exception as exc:
                if not is_build_failure(exc):
                    raise
                mode.write_text("standard")
                _forget_version(name)
            else:
                mode.write_text("light")
                record.headers = "light"
                return module
        return original(name, list(cpp), list(cuda) or None, *args, build_directory=str(directory), **kwargs)

    def summary(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in asdict(r).items() if k != "files"} for r in self.records]
