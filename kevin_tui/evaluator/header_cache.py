"""Where the precompiled headers of torch/extension.h live in the build cache: known here only.

The host (host/builds.py, host/cache.py), the builder workers (worker/pch.py) and the app (the
driver's build hint) all find them through this module:

    <cache>/pch/<key>/torch_extension_pch.h      one line: #include <torch/extension.h>
    <cache>/pch/<key>/torch_extension_pch.h.gch  g++'s compiled form of it (~750 MB)
    <cache>/pch/<key>/.lock                      held shared by each build using it, exclusive to evict it
    <cache>/pch/<key>/.used                      touched on each use (the least recently used goes first)
    <cache>/pch/<key>/.wanted                    a flag set seen once while the store was full
    <cache>/staging/<random>/                    the trusted step making a header, then moved to pch/<key>
    <cache>/staging/<key>.lock                   held while one build makes header <key>
"""

from __future__ import annotations

from pathlib import Path

STORE = "pch"
STAGING = "staging"
HEADER = "torch_extension_pch.h"
HEADER_TEXT = "#include <torch/extension.h>\n"
COMPILED = HEADER + ".gch"
LOCK = ".lock"
USED = ".used"
WANTED = ".wanted"


def store(cache_dir: Path) -> Path:
    return cache_dir / STORE


def staging(cache_dir: Path) -> Path:
    return cache_dir / STAGING


def making_lock(staging_dir: Path, key: str) -> Path:
    return staging_dir / f"{key}{LOCK}"


def any_made(cache_dir: Path) -> bool:
    """Whether any header was ever made here (the first build precompiles one: slow)."""
    return any(store(cache_dir).glob(f"*/{COMPILED}"))


def one_being_made(cache_dir: Path) -> bool:
    """Whether a trusted step is making one right now (a new set of compiler flags)."""
    return any(staging(cache_dir).glob(f"*/{COMPILED}"))
