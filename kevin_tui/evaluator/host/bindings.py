"""The binding translation unit's object, compiled once per set of declarations and linked again after.

load_inline compiles `main.cpp` (torch/extension.h, the candidate's `cpp_sources` and the pybind11
module that `functions=` generates) apart from `cuda.cu`. For a CUDA kernel `main.cpp` holds only the
declarations, which Kevin rarely changes between turns, yet it costs ~7 s of g++ even with the
precompiled header, on the same cores as nvcc. So the host keeps each build's `main.o` under a key
of everything that goes into it, computed here from the checked request (never taken from a
builder), and records its sha256 where no sandbox can write. A later build with that key gets a copy
of it in its own directory, checked against the record after copying, and its builder links that copy
instead of compiling `main.cpp` again: the same command on the same text gives the same object, so it
is the same extension. The copy is what gets checked, so neither a changed original nor a swap during
the copy is ever linked.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.host.cache import Manifests

OBJECT = "main.o"  # torch's name for the object of the generated main.cpp
# Everything in a request that reaches main.cpp or the command compiling it (the CUDA sources, their
# flags and the linker's do not); `uses_cuda` stands for the CUDA include path torch adds to that command.
FIELDS = ("kind", "name", "cpp_sources", "functions", "extra_cflags", "extra_include_paths", "with_cuda",
          "no_implicit_headers")  # fmt: skip
ENTRY = re.compile(r"[A-Za-z0-9_]+-[0-9a-f]{20}")
# The only inclusion a reusable main.cpp may make: a header by name from the system's, torch's or CUDA's
# directories (read-only, the same for every build). A quoted include, a macro one, `__has_include` or a
# name like `cuda.cu` could read a file the key does not cover: the CUDA sources, which are not in it. So can
# `#embed`, and the assembler: `asm(".incbin \"build.ninja\"")` puts the build file (the linker flags, not in
# the key) into the object, so no main.cpp with inline assembly is reused either.
ANGLE_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<[A-Za-z0-9_/+-]+(\.(h|hpp|hh|cuh|inl))?>[ \t]*$", re.MULTILINE)
INCLUDE_WORDS = re.compile(r"include|import|embed\b|incbin|\basm\b|__asm|%:|\?\?=")
# The C++ flags a reusable main.cpp may be compiled with: those whose whole effect is their own text (in the key).
# Every other one may read a file: `-Wp,-imacros,cuda.cu` or `-Xpreprocessor` hand the preprocessor the build's
# CUDA source (not in the key), and so do `--imacros`, `--sysroot`, `-fauto-profile=FILE`.
REUSABLE_FLAG = re.compile(
    r"-O[0-3sgz]?|-Ofast|-g[0-3]?|-[DU]\w+(?:=.*)?|-std=[\w+]+|-w|-pedantic(?:-errors)?|-pthread"
    r"|-W(?:no-)?[a-z][\w-]*(?:=\w+)?|-f(?:no-)?[a-z][\w-]*(?:=[\w+-]+)?|-m[a-z][\w-]*(?:=[\w.+-]+)?",
    re.DOTALL,
)


def binding_key(spec: dict[str, Any], cuda: bool, pch_key: str, versions: dict[str, Any], env: dict[str, str]) -> str:
    """The key of the object `spec`'s main.cpp compiles to: its text, its compiler flags, the
    precompiled header they use, and the toolchain (torch, Python, the compiler and CUDA named in `env`)."""
    payload = {
        **versions, **{name: spec[name] for name in FIELDS}, "uses_cuda": cuda, "pch": pch_key,
        "python": sys.version_info[:2], "cxx": env.get("CXX", ""), "cuda_home": env.get("CUDA_HOME", ""),
    }  # fmt: skip
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]


def reusable(spec: dict[str, Any]) -> bool:
    """Whether main.cpp's object depends only on what `binding_key` covers: no include paths of the
    candidate's, only flags whose effect is their text, and no inclusion other than a plain `#include <header>`."""
    if spec.get("extra_include_paths") or not all(
        REUSABLE_FLAG.fullmatch(str(flag)) for flag in spec.get("extra_cflags") or []
    ):
        return False
    text = "\n".join(spec.get("cpp_sources") or []).replace("\\\n", "")
    spans = [m.span() for m in ANGLE_INCLUDE.finditer(text)]
    return all(any(start <= m.start() < end for start, end in spans) for m in INCLUDE_WORDS.finditer(text))


class BindingObjects:
    """`main.o` files of finished builds (in `builds/`), indexed by binding key in the host's manifests."""

    def __init__(self, builds: Path, manifests: Manifests) -> None:
        self.builds, self.manifests = builds, manifests

    def provide(self, key: str, destination: Path) -> bool:
        """Copy the recorded object for `key` to `destination` and check the copy against the record;
        False (and no copy left) when there is none or it is not what the host recorded."""
        entry = f"binding-{key}"
        try:
            recorded = json.loads((self.manifests.root / f"{entry}.json").read_text()).get("build", "")
        except (OSError, ValueError, AttributeError):
            return False
        if not isinstance(recorded, str) or not ENTRY.fullmatch(recorded):
            return False
        try:
            shutil.copyfile(self.builds / recorded / OBJECT, destination, follow_symlinks=False)
        except OSError:
            self.manifests.forget(entry)
            return False
        if self.manifests.check(entry, destination) is None:
            destination.unlink(missing_ok=True)
            self.manifests.forget(entry)
            return False
        return True

    def remember(self, key: str, directory: Path) -> None:
        """Record `directory`'s freshly compiled main.o (a build the host has just moved into place)."""
        if (directory / OBJECT).is_file() and not (directory / OBJECT).is_symlink():
            self.manifests.record(f"binding-{key}", directory / OBJECT, build=directory.name)
