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

import contextlib
import fcntl
import hashlib
import inspect
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from functools import cache
from pathlib import Path

from kevin_tui.evaluator.worker.common import log_stage

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


def pch_relevant(flags: list[str]) -> list[str]:
    """The flags a PCH must share with its users; warning flags are not among them, so they do not make
    another ~750 MB header."""
    return [f for f in flags if not (f.startswith("-W") and not f.startswith("-Wp,")) and f != "-w"]


DEFAULT_MAX_GB = "2"  # two headers (~0.8 GB each: e.g. -O2 and -O3); a third flag set evicts the oldest


def max_bytes() -> int:
    return int(float(os.environ.get("KEVIN_TUI_PCH_MAX_GB", DEFAULT_MAX_GB)) * (1 << 30))


def directory_bytes(path: Path) -> int:
    total = 0
    for f in path.rglob("*"):
        with contextlib.suppress(OSError):  # removed while we walk: another build evicted it
            total += f.stat().st_size if f.is_file() else 0
    return total


_held: list = []  # shared locks on the headers this process uses, released when it exits


def admit(directory: Path) -> bool:
    """Whether to build a new header here. When it would not fit beside the others, a flag set seen for
    the first time builds without one (a build that makes a header takes about twice as long as one
    without) and gets its header when it comes back, evicting the least recently used."""
    sizes = []
    for other in directory.parent.iterdir():
        with contextlib.suppress(OSError):  # another build may be evicting it right now
            sizes.append((other / (HEADER + ".gch")).stat().st_size)
    if not sizes or directory_bytes(directory.parent) + max(sizes) <= max_bytes():
        return True
    wanted = directory / ".wanted"
    if wanted.exists():
        return True
    wanted.touch()
    return False


def evict(pch_root: Path, keep: Path, limit: int) -> list[Path]:
    """Remove least recently used headers until the total fits `limit`; headers in use (locked) stay."""
    entries = []
    for directory in pch_root.iterdir():
        if directory.is_dir() and directory != keep:
            stamp = directory / ".used"
            entries.append((stamp.stat().st_mtime if stamp.exists() else 0.0, directory))
    total = directory_bytes(pch_root)
    removed = []
    for _, directory in sorted(entries):
        if total <= limit:
            break
        with open(directory / ".lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a build is using it
            size = directory_bytes(directory)
            shutil.rmtree(directory, ignore_errors=True)
        total -= size
        removed.append(directory)
    return removed


def remove_partials(directory: Path) -> None:
    """Half-written headers (up to ~0.8 GB each) of builds killed mid-way (the user quit): called
    under the directory's exclusive lock, so no live build is writing one."""
    for partial in directory.glob(f"{HEADER}.gch.*"):
        partial.unlink(missing_ok=True)


def pch_flags(cache_root: Path, extra_cflags: list[str], include_paths: list[str]) -> list[str]:
    """Flags that make g++ use a PCH of torch/extension.h built for these flags; [] when unavailable."""
    if not sys.platform.startswith("linux") or not is_gcc(cxx_compiler()):
        return []
    import torch

    extra_cflags = pch_relevant(extra_cflags)
    probe = pch_command(Path(HEADER), Path(HEADER + ".gch"), extra_cflags, include_paths)
    key = hashlib.sha256(f"{torch.__version__}\0{shlex.join(probe)}".encode()).hexdigest()[:20]
    directory = cache_root / "pch" / key
    directory.mkdir(parents=True, exist_ok=True)
    header, gch = directory / HEADER, directory / (HEADER + ".gch")
    lock = open(directory / ".lock", "a")  # noqa: SIM115  held (shared) for the rest of this build
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not gch.exists() and not admit(directory):
        lock.close()
        return []
    if not gch.exists():
        remove_partials(directory)
        log_stage("precompiling torch/extension.h for these compiler flags (once per flag set, about a minute)")
        header.write_text("#include <torch/extension.h>\n")
        partial = directory / f"{HEADER}.gch.{os.getpid()}"
        command = pch_command(header, partial, extra_cflags, include_paths)
        result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            partial.unlink(missing_ok=True)
            lock.close()
            print(f"kevin-tui: no precompiled header ({result.stderr[-500:]})", file=sys.stderr)
            return []
        partial.rename(gch)
        log_stage("precompiled header ready")
    fcntl.flock(lock, fcntl.LOCK_SH)
    _held.append(lock)
    (directory / ".used").touch()
    evict(directory.parent, directory, max_bytes())
    return ["-include", str(header)]
