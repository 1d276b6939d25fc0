"""Content-addressed builds for load_inline (runs inside the candidate worker).

Every candidate calls its extension something like `elementwise_add`, so torch's
default directory (keyed by name) would make candidates overwrite each other.
Here the directory is keyed by a hash of everything that changes the binary,
so an identical source reuses its build and different ones never collide.

torch guards a build with a `lock` file that a killed build leaves behind, and
a later build then waits on it forever. We hold an flock (released by the
kernel when the holder dies) while building, so any `lock` file found while we
hold it is stale and can be removed.
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

CPP_HEADER_LINES = 1  # '#include <torch/extension.h>'
CUDA_HEADER_LINES = 3  # torch/types.h, cuda.h, cuda_runtime.h


class EnvironmentProblem(Exception):
    """This machine cannot build the candidate (CPU-only torch, no nvcc): not the candidate's fault."""


@dataclass
class BuildRecord:
    name: str
    directory: str
    uses_cuda: bool
    cached: bool
    seconds: float = 0.0
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
        raise EnvironmentProblem(
            f"nvcc not found (CUDA_HOME={home!r}); install the CUDA toolkit and set CUDA_HOME"
        )


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
            try:
                return original(
                    name, list(cpp), list(cuda) or None, *args, build_directory=str(directory), **kwargs
                )
            finally:
                record.seconds = time.perf_counter() - start

    def summary(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in asdict(r).items() if k != "files"} for r in self.records]
