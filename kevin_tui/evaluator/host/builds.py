"""The build broker: every `load_inline` a candidate makes is built here, never in its own process.

A request is normalised first (empty and repeated flags dropped, flags that make a compiler run other
programs refused), then keyed by a hash of everything that changes the binary. A key already built
and intact is reused; otherwise a fresh sandboxed builder compiles it into a temporary directory
that the host moves into place and records, with the library's sha256 and size, in a manifest the
candidate cannot write. A library whose hash does not match is never handed out, and an entry
whose file changed after it was recorded marks the candidate that changed it as `rejected`.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.compiler_output import GeneratedFile, SourceMap, first_errors, with_hints
from kevin_tui.evaluator.host.sandbox import Bind, Limits, Sandbox
from kevin_tui.evaluator.host.workers import WorkerGone, WorkerProcess, WorkerTimeout
from kevin_tui.evaluator.protocol import ProtocolViolation
from kevin_tui.evaluator.verdict import EnvironmentProblem

MANIFEST = ".kevin-manifest.json"
CPP_HEADER_LINES = 1  # '#include <torch/extension.h>'
CUDA_HEADER_LINES = 3  # torch/types.h, cuda.h, cuda_runtime.h
FLAG_LISTS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
# Flags that make a compiler or linker run (or load) another program, or write outside its build.
DENIED_FLAGS = (
    "-wrapper", "-fplugin", "-B", "-specs", "--specs", "@", "-o", "-ccbin", "--compiler-bindir", "-plugin",
    "--plugin", "-MF", "--keep-dir", "-keep-dir", "-odir", "--output-directory", "--dependency-output",
    "-fuse-ld=/", "--linker-options", "-Xlinker",
)  # fmt: skip


class FlagRefused(Exception):
    pass


def _units(flags: list[str]) -> list[tuple[str, ...]]:
    """Group an option with the plain words that follow it (`-gencode arch=...` is one unit)."""
    units: list[list[str]] = []
    for flag in flags:
        if flag.startswith("-") or not units:
            units.append([flag])
        else:
            units[-1].append(flag)
    return [tuple(u) for u in units]


def normalise_flags(flags: list[str]) -> list[str]:
    """Drop empty flags (g++ reads `""` as a file name: stdin) and repeats, keeping the last of each."""
    units = _units([f.strip() for f in flags if f.strip()])
    kept = [u for i, u in enumerate(units) if u not in units[i + 1 :]]
    for unit in kept:
        for token in unit:
            for part in token.replace(",", " ").split():
                if any(part == d or part.startswith(d) for d in DENIED_FLAGS):
                    raise FlagRefused(
                        f"the flag {token!r} is not allowed: it makes the compiler run or write elsewhere"
                    )
    return [token for unit in kept for token in unit]


def normalise(request: dict[str, Any]) -> dict[str, Any]:
    spec = {k: v for k, v in request.items() if k != "event"}
    for name in FLAG_LISTS:
        spec[name] = normalise_flags(spec[name])
    spec["extra_include_paths"] = list(dict.fromkeys(p for p in spec["extra_include_paths"] if p.strip()))
    return spec


def uses_cuda(spec: dict[str, Any]) -> bool:
    return bool(spec["cuda_sources"]) or any(name.endswith(".cu") for name, _ in spec["sources"])


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class BuildRecord:
    """One build a candidate asked for, as the host saw it (this is what `builds` in a verdict lists)."""

    name: str
    directory: str
    uses_cuda: bool
    cached: bool
    ok: bool = True
    seconds: float = 0.0
    headers: str = "standard"
    message: str = ""
    compiler_errors: list[dict] = field(default_factory=list)
    log: str = ""
    loaded: bool | None = None

    def summary(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("log", "compiler_errors")}


@dataclass
class Entry:
    """What the manifest says about a built library, and the file's identity when it was checked."""

    path: Path
    sha256: str
    size: int
    identity: tuple[int, int, int]


def _identity(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return (st.st_ino, st.st_size, st.st_ctime_ns)


class BuildBroker:
    def __init__(self, root: Path, sandbox: Sandbox, env: dict[str, str], limits: Limits, scratch: Path) -> None:
        self.root = root
        self.sandbox, self.env, self.limits, self.scratch = sandbox, env, limits, scratch
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root.parent / "pch").mkdir(parents=True, exist_ok=True)
        self.verified: dict[str, Entry] = {}
        self.last_log: Path | None = None  # the latest builder's log: its stages, stamped, as they happen

    def key(self, spec: dict[str, Any], versions: dict[str, Any]) -> str:
        payload = {**spec, **versions, "arch": self.env.get("TORCH_CUDA_ARCH_LIST", ""), "python": sys.version_info[:2]}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def verify(self, directory: Path, name: str) -> Entry | None:
        """The entry if its library matches the manifest; None if it is missing, unrecorded or altered."""
        try:
            manifest = json.loads((directory / MANIFEST).read_text())
            library = directory / f"{name}.so"
            identity = _identity(library)
        except (OSError, ValueError):
            return None
        known = self.verified.get(str(library))
        if known is not None and known.identity == identity:
            return known
        if manifest.get("size") != identity[1] or sha256_file(library) != manifest.get("sha256"):
            return None
        entry = Entry(library, manifest["sha256"], identity[1], identity)
        self.verified[str(library)] = entry
        return entry

    def tampered(self) -> list[str]:
        """Libraries handed out in this process whose file changed since they were checked."""
        changed = []
        for path, entry in self.verified.items():
            try:
                if _identity(Path(path)) != entry.identity:
                    changed.append(path)
            except OSError:
                changed.append(path)
        return changed

    def build(self, request: dict[str, Any], versions: dict[str, Any], source: str, deadline: float) -> BuildRecord:
        """Build (or reuse) what a `build_request` event asks for. Raises WorkerTimeout past `deadline`."""
        name = request["name"]
        try:
            spec = normalise(request)
        except FlagRefused as exc:
            return BuildRecord(name, "", uses_cuda(request), False, ok=False, message=str(exc))
        if not name.isidentifier():
            return BuildRecord(
                name, "", uses_cuda(spec), False, ok=False, message=f"{name!r} is not a valid extension name"
            )
        key = self.key(spec, versions)
        directory = self.root / f"{name}-{key[:20]}"
        record = BuildRecord(name, str(directory), uses_cuda(spec), cached=False)
        if self.verify(directory, name) is not None:
            record.cached = True
            record.headers = _read_headers(directory)
            return record
        started = time.perf_counter()
        try:
            self._run_builder(spec, directory, record, deadline)
        finally:
            record.seconds = round(time.perf_counter() - started, 3)
        if not record.ok:
            files = _generated_files(spec)
            record.compiler_errors = first_errors(record.log, SourceMap(source, files))
            record.message = with_hints(record.compiler_errors, record.log) or record.message
        return record

    def _run_builder(self, spec: dict[str, Any], directory: Path, record: BuildRecord, deadline: float) -> None:
        temporary = self.root / f".tmp-{directory.name}-{secrets.token_hex(4)}"
        temporary.mkdir()
        scratch = self.scratch / f"builder-{temporary.name}"
        binds = [Bind(str(temporary), writable=True), Bind(str(self.root.parent / "pch"), writable=True)]
        worker = WorkerProcess("builder", scratch, self.env, self.sandbox, binds, self.limits)
        self.last_log = worker.log_path
        try:
            worker.send(
                {"cmd": "build", "spec": spec, "directory": str(temporary), "cache_root": str(self.root.parent)}
            )
            event = worker.event(deadline - time.monotonic())
        except (WorkerGone, ProtocolViolation) as exc:
            record.ok, record.message = False, f"the builder {exc}"
            record.log = worker.log_tail()
            shutil.rmtree(temporary, ignore_errors=True)
            return
        except WorkerTimeout:
            shutil.rmtree(temporary, ignore_errors=True)
            raise
        finally:
            worker.kill()
        self._finish(event, spec, temporary, directory, record)

    def _finish(self, event: dict, spec: dict, temporary: Path, directory: Path, record: BuildRecord) -> None:
        kind = event["event"]
        if kind == "environment_error":
            shutil.rmtree(temporary, ignore_errors=True)
            raise EnvironmentProblem(event["message"])
        record.headers = event.get("headers", "standard")
        library = temporary / f"{spec['name']}.so"
        if kind != "built" or not library.is_file():
            shutil.rmtree(temporary, ignore_errors=True)
            record.ok = False
            record.log = event.get("log") or event.get("traceback") or ""
            record.message = event.get("message", "the build produced no library")
            return
        (temporary / ".kevin-headers").write_text(record.headers)
        manifest = {"name": spec["name"], "sha256": sha256_file(library), "size": library.stat().st_size}
        (temporary / MANIFEST).write_text(json.dumps(manifest))
        try:
            os.rename(temporary, directory)
        except OSError:  # built meanwhile by someone else, or a leftover: keep a verified one, else replace
            if self.verify(directory, spec["name"]) is None:
                shutil.rmtree(directory, ignore_errors=True)
                os.rename(temporary, directory)
            else:
                shutil.rmtree(temporary, ignore_errors=True)
        if self.verify(directory, spec["name"]) is None:
            record.ok, record.message = False, "the built library changed before it could be recorded"


def _read_headers(directory: Path) -> str:
    try:
        return (directory / ".kevin-headers").read_text().strip() or "standard"
    except OSError:
        return "standard"


def _generated_files(spec: dict[str, Any]) -> dict[str, GeneratedFile]:
    implicit = not spec["no_implicit_headers"]
    files = {"main.cpp": GeneratedFile(CPP_HEADER_LINES if implicit else 0, spec["cpp_sources"])}
    if spec["cuda_sources"]:
        files["cuda.cu"] = GeneratedFile(CUDA_HEADER_LINES if implicit else 0, spec["cuda_sources"])
    for name, text in spec["sources"]:
        files[name] = GeneratedFile(0, [text])
    return files
