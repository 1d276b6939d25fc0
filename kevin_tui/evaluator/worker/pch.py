"""A precompiled header of torch/extension.h, kept in our cache (runs in builder workers).

Parsing torch/extension.h is most of a load_inline build (about 30 s of g++ on these machines,
for a ten-line kernel). We compile it once per set of flags and add `-include <that header>` to the
C++ flags; g++ then loads the .gch instead of parsing, and the `#include <torch/extension.h>` that
load_inline prepends becomes a no-op.

A header is made only by a trusted step of its own (no candidate source, only torch's header and the
checked flags, writing only into a fresh directory); the host checks it and moves it into
`<cache>/pch/<key>/`, which every builder sees read-only, so no build can change a header another
build uses (see host/cache.py for the store's cap and eviction).

torch has `load_inline(use_pch=True)`, but it writes the .gch into torch's own install directory,
any build without it deletes that file again, and concurrent builds race on it. Ours is keyed,
locked and written atomically. Anything unusual (not g++, not Linux, a failing PCH build) falls
back to a normal build: the PCH only ever saves time.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import os
import re
import shlex
import subprocess
import sys
import sysconfig
from functools import cache
from pathlib import Path

from kevin_tui.evaluator.header_cache import COMPILED, HEADER, HEADER_TEXT, LOCK
from kevin_tui.evaluator.worker.common import log_stage


def cxx_compiler() -> str:
    return os.environ.get("CXX", "c++")


@cache
def is_gcc(compiler: str) -> bool:
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "clang" not in out.lower() and ("gcc" in out.lower() or "g++" in out or "Free Software" in out)


@cache
def torch_cxx_std() -> str:
    """The -std flag torch's cpp_extension compiles with (c++17 or c++20 depending on the version)."""
    from torch.utils import cpp_extension

    match = re.search(r"common_cflags \+= \['(-std=c\+\+\d+)'", inspect.getsource(cpp_extension))
    return match[1] if match else "-std=c++17"


def pch_command(header: Path, output: Path, extra_cflags: list[str], include_paths: list[str]) -> list[str]:
    from torch.utils import cpp_extension

    torch_include = Path(cpp_extension.__file__).resolve().parents[1] / "include"
    return [
        cxx_compiler(), "-x", "c++-header", str(header), "-o", str(output),
        "-I", str(torch_include), "-I", str(torch_include / "torch" / "csrc" / "api" / "include"),
        "-I", sysconfig.get_path("include"), *[f"-I{p}" for p in include_paths],
        "-DTORCH_API_INCLUDE_EXTENSION_H", torch_cxx_std(), "-fPIC", *extra_cflags,
    ]  # fmt: skip


def pch_relevant(flags: list[str]) -> list[str]:
    """The flags a PCH must share with its users; warning flags are not among them, so they do not make
    another ~750 MB header."""
    return [f for f in flags if not (f.startswith("-W") and not f.startswith("-Wp,")) and f != "-w"]


def pch_key(extra_cflags: list[str], include_paths: list[str]) -> str:
    """The store key of the header these flags need ('' where no PCH can be used: not g++, not Linux)."""
    if not sys.platform.startswith("linux") or not is_gcc(cxx_compiler()):
        return ""
    import torch

    probe = pch_command(Path(HEADER), Path(COMPILED), pch_relevant(extra_cflags), include_paths)
    return hashlib.sha256(f"{torch.__version__}\0{shlex.join(probe)}".encode()).hexdigest()[:20]


def build_pch(directory: Path, extra_cflags: list[str], include_paths: list[str]) -> str:
    """Compile the header into `directory` (a fresh one of the trusted step's own); '' or why it failed."""
    header = directory / HEADER
    header.write_text(HEADER_TEXT)
    log_stage("precompiling torch/extension.h for these compiler flags (once per flag set, about a minute)")
    command = pch_command(header, directory / COMPILED, pch_relevant(extra_cflags), include_paths)
    result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        return f"no precompiled header ({result.stderr[-500:]})"
    log_stage("precompiled header ready")
    return ""


_held: list = []  # shared locks on the headers this process uses, released when it exits


def pch_flags(store: Path, key: str) -> list[str]:
    """Flags that make g++ use the stored header `key` (read-only here; the host made and checked it), held
    under a shared lock so that it is not evicted during this build; [] when there is none."""
    directory = store / key
    header = directory / HEADER
    if not key or not (directory / COMPILED).is_file():
        return []
    try:
        lock = open(directory / LOCK)  # noqa: SIM115  held for the rest of this build
    except OSError:
        return []
    fcntl.flock(lock, fcntl.LOCK_SH)
    _held.append(lock)
    return ["-include", str(header)]
