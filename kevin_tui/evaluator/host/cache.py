"""The build cache on disk: what it holds, what the host recorded about it, and how to empty it
(`kevin-tui cache`).

Builds are small (one library and its objects per source); precompiled headers are ~750 MB each,
one per set of compiler flags, and are capped (KEVIN_TUI_PCH_MAX_GB, default 2) with the least
recently used removed first (see worker/pch.py). Every file the host puts in the cache is recorded
(sha256, size, identity) under `manifests/`, a directory no sandbox is ever given, and checked
against that record whenever it is used again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kevin_tui.evaluator import header_cache
from kevin_tui.evaluator.header_cache import COMPILED, HEADER, HEADER_TEXT, LOCK, USED, WANTED
from kevin_tui.evaluator.host.scratch import remove_tree

PARTS = ("builds", header_cache.STORE, "manifests", header_cache.STAGING)
PART_NAMES = {"builds": "extension builds", header_cache.STORE: "precompiled headers", "manifests": "host records"}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def identity(path: Path) -> list[int]:
    """What changes whenever a file is written, replaced or swapped (a link is never a cached file)."""
    st = os.stat(path, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path} is not a plain file")
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class Manifests:
    """The host's records of the files it put into the cache, one JSON file per entry, kept where no
    sandbox can write (or read)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def record(self, entry: str, path: Path, **extra: Any) -> dict[str, Any]:
        manifest = {"sha256": sha256_file(path), "identity": identity(path), **extra}
        manifest["size"] = manifest["identity"][1]
        temporary = self.root / f".{entry}.json.{os.getpid()}"
        temporary.write_text(json.dumps(manifest))
        os.replace(temporary, self.root / f"{entry}.json")
        return manifest

    def check(self, entry: str, path: Path, rehash: bool = True) -> dict[str, Any] | None:
        """The record if `path` still holds what was recorded; None when it is missing, unrecorded or
        changed. `rehash`: hash the file even when its identity is unchanged (small files)."""
        try:
            manifest = json.loads((self.root / f"{entry}.json").read_text())
            now = identity(path)
        except (OSError, ValueError):
            return None
        if not isinstance(manifest, dict) or manifest.get("size") != now[1]:
            return None
        if not rehash and manifest.get("identity") == now:
            return manifest
        if sha256_file(path) != manifest.get("sha256"):
            return None
        return manifest

    def forget(self, entry: str) -> None:
        with contextlib.suppress(OSError):
            (self.root / f"{entry}.json").unlink()


@dataclass
class Usage:
    entries: int
    bytes: int


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def usage(root: Path) -> dict[str, Usage]:
    found = {}
    for part in PARTS:
        directory = root / part
        entries = [d for d in directory.iterdir() if d.is_dir() or part == "manifests"] if directory.is_dir() else []
        found[part] = Usage(len(entries), sum(_size(d) for d in entries))
    return found


def clean(root: Path, parts: tuple[str, ...] = PARTS) -> int:
    """Remove the given parts of the cache; the bytes freed."""
    freed = 0
    for part in parts:
        directory = root / part
        if directory.is_dir():
            freed += _size(directory)
            remove_tree(directory)
    return freed


def describe(root: Path) -> str:
    lines = [f"build cache: {root}"]
    for part, found in usage(root).items():
        what = PART_NAMES.get(part, "headers being made")
        lines.append(f"  {part:<7} {found.entries:5d} {what:<20} {found.bytes / (1 << 20):10.1f} MB")
    return "\n".join(lines)


# -- the precompiled-header store (host side: only the host adds, checks and removes headers) ----------


DEFAULT_MAX_GB = "2"  # two headers (~0.8 GB each: e.g. -O2 and -O3); a third flag set evicts the oldest


def max_bytes() -> int:
    return int(float(os.environ.get("KEVIN_TUI_PCH_MAX_GB", DEFAULT_MAX_GB)) * (1 << 30))


def directory_bytes(path: Path) -> int:
    total = 0
    for f in path.rglob("*"):
        with contextlib.suppress(OSError):  # removed while we walk: another build evicted it
            total += f.stat().st_size if f.is_file() else 0
    return total


def admit(directory: Path) -> bool:
    """Whether to build a new header here. When it would not fit beside the others, a flag set seen for
    the first time builds without one (a build that makes a header takes about twice as long as one
    without) and gets its header when it comes back, evicting the least recently used."""
    directory.mkdir(parents=True, exist_ok=True)
    sizes = []
    for other in directory.parent.iterdir():
        with contextlib.suppress(OSError):  # another build may be evicting it right now
            sizes.append((other / COMPILED).stat().st_size)
    if not sizes or directory_bytes(directory.parent) + max(sizes) <= max_bytes():
        return True
    wanted = directory / WANTED
    if wanted.exists():
        return True
    wanted.touch()
    return False


def evict(pch_root: Path, keep: Path, limit: int) -> list[Path]:
    """Remove least recently used headers until the total fits `limit`; headers in use (locked) stay."""
    entries = []
    for directory in pch_root.iterdir():
        if directory.is_dir() and directory != keep:
            stamp = directory / USED
            entries.append((stamp.stat().st_mtime if stamp.exists() else 0.0, directory))
    total = directory_bytes(pch_root)
    removed = []
    for _, directory in sorted(entries):
        if total <= limit:
            break
        with open(directory / LOCK, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a build is using it
            size = directory_bytes(directory)
            remove_tree(directory)
        total -= size
        removed.append(directory)
    return removed


def install_pch(staging: Path, store: Path, key: str, manifests: Manifests) -> bool:
    """Move a header the trusted step made in `staging` into the store as `key`, recorded; False when the
    step left anything but the header and its .gch (nothing of it is kept then)."""
    header, gch = staging / HEADER, staging / COMPILED
    names = sorted(p.name for p in staging.iterdir())
    plain = all(p.is_file() and not p.is_symlink() for p in (header, gch))
    if names != sorted([header.name, gch.name]) or not plain or header.read_text() != HEADER_TEXT:
        remove_tree(staging)
        return False
    (staging / LOCK).touch()
    target = store / key
    if target.exists() and manifests.check(f"pch-{key}", target / gch.name, rehash=False) is None:
        remove_tree(target)  # an empty one admit() made, or a header that failed its check
    try:
        os.rename(staging, target)
    except OSError:  # made meanwhile by another build: keep that one
        remove_tree(staging)
        return manifests.check(f"pch-{key}", target / gch.name, rehash=False) is not None
    manifests.record(f"pch-{key}", target / gch.name)
    (target / USED).touch()
    evict(store, target, max_bytes())
    return True


def usable_pch(store: Path, key: str, manifests: Manifests) -> bool:
    """A stored header that is still what the host recorded (a changed one is removed)."""
    gch = store / key / COMPILED
    if not gch.exists():
        return False
    if manifests.check(f"pch-{key}", gch, rehash=False) is None:
        remove_tree(store / key)
        manifests.forget(f"pch-{key}")
        return False
    (store / key / USED).touch()
    return True


STALE_STAGING_S = 2 * 3600  # a header takes a minute or two to build; one older than this was abandoned


def sweep_staging(staging: Path, now: float | None = None) -> list[Path]:
    """Remove what headers' builds left in `staging` when the process running them died (up to ~0.8 GB each:
    the user quit, or kevin-tui was killed); a directory still being written to is younger than this."""
    now = time.time() if now is None else now
    removed = []
    for entry in staging.iterdir() if staging.is_dir() else []:
        with contextlib.suppress(OSError):
            if now - entry.stat().st_mtime > STALE_STAGING_S:
                remove_tree(entry)  # a file, a link or a tree of any depth (its builder wrote it)
                removed.append(entry)
    return removed
