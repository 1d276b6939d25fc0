"""A precompiled header of torch/extension.h, kept in our cache (runs inside the candidate worker).

Parsing torch/extension.h is most of a load_inline build (about 30 s of g++ on these machines,
for a ten-line kernel). We compile it once per set of flags into `<cache>/pch/<key>/` and add
`-include <that header>` to the C++ flags; g++ then loads the .gch instead of parsing, and the
`#include <torch/extension.h>` that load_inline prepends becomes a no-op.

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

HEADER = "torch_extension_pch.h"


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


def pch_flags(cache_root: Path, extra_cflags: list[str], include_paths: list[str]) -> list[str]:
    """Flags that make g++ use a PCH of torch/extension.h built for these flags; [] when unavailable."""
    if not sys.platform.startswith("linux") or not is_gcc(cxx_compiler()):
        return []
    import torch

    probe = pch_command(Path(HEADER), Path(HEADER + ".gch"), extra_cflags, include_paths)
    key = hashlib.sha256(f"{torch.__version__}\0{shlex.join(probe)}".encode()).hexdigest()[:20]
    directory = cache_root / "pch" / key
    directory.mkdir(parents=True, exist_ok=True)
    header, gch = directory / HEADER, directory / (HEADER + ".gch")
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not gch.exists():
            header.write_text("#include <torch/extension.h>\n")
            partial = directory / f"{HEADER}.gch.{os.getpid()}"
            result = subprocess.run(
                pch_command(header, partial, extra_cflags, include_paths), capture_output=True, text=True
            )
            if result.returncode != 0:
                partial.unlink(missing_ok=True)
                print(f"kevin-tui: no precompiled header ({result.stderr[-500:]})", file=sys.stderr)
                return []
            partial.rename(gch)
    return ["-include", str(header)]
