"""The build broker: every `load_inline` a candidate makes is built here, never in its own process.

A request is checked and normalised first (empty and repeated flags dropped; flags that make a
compiler run other programs or write elsewhere refused, and so are control characters, `$` and the
shell's other special characters, which torch writes unescaped into build.ninja and ninja hands to
`/bin/sh -c`; linker options only from an allow-list; source names
plain file names), then keyed by a hash of everything that changes the binary. A key already built
and intact is reused; otherwise a fresh sandboxed builder compiles it into a temporary directory
that the host moves into place and records, with the library's sha256 and size, in a manifest kept
where no sandbox can write (`<cache>/manifests`). Every hand-out checks the library against it (a
mismatch is rebuilt, never loaded), and a candidate during whose run a cached library stopped
matching its manifest is `rejected`. A build may leave at most `MAX_BUILD_BYTES` in the cache (its builder
may write no larger file): the cache is never swept, so a library made huge on purpose would stay.
Precompiled headers are made by a trusted step of their own and every builder sees them read-only. A build
whose binding unit (main.cpp) was compiled before gets a checked copy of that object to link instead
(host/bindings.py). A build that failed with the compiler's own errors fails at once when asked for again
(host/failed_builds.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kevin_tui.evaluator import header_cache
from kevin_tui.evaluator.compiler_output import GeneratedFile, SourceMap, first_errors, with_hints
from kevin_tui.evaluator.host.bindings import OBJECT, BindingObjects, binding_key, reusable
from kevin_tui.evaluator.host.cache import (
    Manifests,
    admit,
    directory_bytes,
    identity,
    install_pch,
    sweep_staging,
    usable_pch,
)
from kevin_tui.evaluator.host.failed_builds import FailedBuilds
from kevin_tui.evaluator.host.sandbox import Bind, Limits, Sandbox
from kevin_tui.evaluator.host.scratch import remove_tree
from kevin_tui.evaluator.host.static_checks import compute_operator
from kevin_tui.evaluator.host.workers import WorkerGone, WorkerProcess, WorkerTimeout
from kevin_tui.evaluator.protocol import ProtocolViolation
from kevin_tui.evaluator.verdict import EnvironmentProblem

CPP_HEADER_LINES = 1  # '#include <torch/extension.h>'
CUDA_HEADER_LINES = 3  # torch/types.h, cuda.h, cuda_runtime.h
STAGING = ".tmp-"  # a build directory's name while its builder works in it
FLAG_LISTS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
# Flags that make a compiler or linker run (or load) another program, or write outside its build.
DENIED_FLAGS = (
    "-wrapper", "-fplugin", "-B", "-specs", "--specs", "@", "-o", "-ccbin", "--compiler-bindir", "-plugin",
    "--plugin", "-MF", "--keep-dir", "-keep-dir", "-odir", "--output-directory", "--dependency-output",
    "-fuse-ld=/", "--linker-options", "-Xlinker", "-aux-info", "-dumpdir", "-dumpbase", "-fdump-", "-fopt-info",
    "-fcallgraph-info", "-fprofile-", "-Xnvlink", "-Xarchive",
    # nvcc's and ptxas's own response files (gcc's is `@`): options read from a file pass every check here, and
    # `--options-file cuda.cu` read the candidate's CUDA source (`-Xcompiler=-wrapper,PROG`: the builder ran PROG)
    "-optf", "--options-file",
    # nvcc running a program (the archiver, the built executable) or writing a file it is told (timings, traces,
    # the fat binary: `-Xfatbin --create=main.o`), and gcc's long spellings of `-o`
    "-arbin", "--archiver-binary", "-run", "--run", "-time", "--time", "-fdevice-time-trace", "--fdevice-time-trace",
    "-create", "--create", "--embedded-fatbin", "--output", "-fdiagnostics-add-output", "-fdiagnostics-set-output",
)  # fmt: skip
# Linker options are allowed by name: every other one (`-Wl,-Map=`, `--dependency-file`, ...) could write a file.
LINK_FLAGS = re.compile(
    r"-l:?[\w.+-]+|-L/?[\w./+-]+|-pthread|-fopenmp|-shared|-rdynamic|-static-lib(?:gcc|stdc\+\+)|-O[0-3s]?|-g|-s"
)
LINKER_OPTIONS = re.compile(
    r"--?(?:no-)?as-needed|-O[0-3]|--(?:no-)?gc-sections|--(?:enable|disable)-new-dtags|--(?:no-)?whole-archive"
    r"|--(?:start|end)-group|-s|--strip-all|--strip-debug|-Bsymbolic(?:-functions)?"
)
LINKER_ARGUMENTS = {"-rpath": re.compile(r"/?[\w./+-]+"), "-z": re.compile(r"now|lazy|relro|norelro|defs|noexecstack")}
# What ninja (`$`, newlines) or the shell it runs each command with (`;`, `|`, `` ` ``, quotes...) would read.
UNSAFE_CHARACTERS = re.compile(r"""[\x00-\x1f\x7f$;&|<>()`'"\\*?\[\]{}#]""")
SOURCE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}\.(?:c|cc|cpp|cxx|cu|h|hpp|cuh)")
# torch writes each of `functions=` into main.cpp unescaped, `m.def("NAME", wrap(NAME), "DOC");`: a name is code
# there, and a docstring with a quote (or a backslash, a line break) ends its literal and carries any C++ past the
# scan of the sources. A name must be an identifier, a docstring text that stays inside its string.
FUNCTION_NAME = re.compile(r"[A-Za-z_]\w{0,99}")
LEAVES_THE_LITERAL = re.compile(r'["\\\x00-\x1f\x7f]')
MAX_NAME = 100
# What one build may leave in the persistent cache (a library with its object files), and so the largest file
# its builder may write: a candidate's `.fill` in a data section makes a library of any size, kept for good.
MAX_BUILD_BYTES = 512 << 20
SETTLE_S = 1.0  # for a library another kevin-tui moved into the shared cache to be recorded (it records at once)
# The trusted step's answers (which header some flags need), for every broker of this process on the same store,
# worker environment and sandbox: the answer depends on nothing else, and asking again is a worker start (~2 s)
# for each new evaluator (each problem of a batch run, each re-open). Still checked against the store's record.
PCH_KEYS: dict[tuple[str, str, str, str], str] = {}


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


def _safe_text(what: str, token: str) -> None:
    """torch writes flags and paths into build.ninja unescaped: a newline or a `$` there adds statements
    that ninja runs, and ninja runs each command with `/bin/sh -c`, so `-O3;cmd` would run `cmd` in the
    builder (which could then write any object, such as a main.o later builds link)."""
    if UNSAFE_CHARACTERS.search(token):
        raise FlagRefused(
            f"the {what} {token[:80]!r} is not allowed: it holds a control character or one the shell reads "
            "($ ; & | < > ( ) ` ' \" \\ * ? [ ] { } #); pass each option as a list item of its own, unquoted"
        )


def _linker_option(text: str) -> bool:
    """`-Wl,a,b,...`: every option one the allow-list names (with its argument, for -rpath and -z)."""
    parts = text.split(",")
    while parts:
        part = parts.pop(0)
        for option, argument in LINKER_ARGUMENTS.items():
            if part == option:
                if not parts or not argument.fullmatch(parts.pop(0)):
                    return False
                break
            if part.startswith(option + "="):
                if not argument.fullmatch(part[len(option) + 1 :]):
                    return False
                break
        else:
            if not LINKER_OPTIONS.fullmatch(part):
                return False
    return True


# Flags under which the compiler reads trigraphs (`??=??=` is `##`, `??'` is `^`, `??/` a backslash) before anything
# else: `-trigraphs`, and the ISO modes before C++17 (and C's). The host's scans of the text (cpp_text, static_checks)
# read it as C++17 does; with them, a name was pasted past the finding that refuses `##`
# (tests/candidates/redteam24/relu_cpp_trigraph_paste.py). torch's headers need C++17 anyway.
TRIGRAPHS = re.compile(
    r"-trigraphs|-ansi|--?std=(?:c\+\+(?:98|03|0x|11|1y|14)|c(?:89|90|99|9x|11|1x|17|18)|iso9899:\S*)"
)


def check_link_flags(flags: list[str]) -> None:
    for flag in flags:
        if flag.startswith("-Wl,") and _linker_option(flag[4:]):
            continue
        if not LINK_FLAGS.fullmatch(flag):
            raise FlagRefused(
                f"the linker option {flag[:80]!r} is not allowed (only -l, -L, -pthread, -fopenmp and linker options "
                "that write no files, such as -Wl,-rpath,DIR or -Wl,--no-as-needed)"
            )


def _options_in(token: str) -> list[str]:
    """Every option a flag hands on: its comma- or space-separated parts, and an option given as another's value
    (`-Xcompiler=-wrapper,/usr/bin/echo` hands nvcc's host compiler `-wrapper`, which then ran echo in the builder)."""
    found = []
    for part in token.replace(",", " ").split():
        found.append(part)
        while "=" in part and (part := part.split("=", 1)[1])[:1] in ("-", "@"):
            found.append(part)
    return found


def normalise_flags(flags: list[str]) -> list[str]:
    """Drop empty flags (g++ reads `""` as a file name: stdin) and repeats, keeping the last of each."""
    for flag in flags:
        _safe_text("flag", flag)
    units = _units([f.strip() for f in flags if f.strip()])
    kept = [u for i, u in enumerate(units) if u not in units[i + 1 :]]
    for unit in kept:
        for token in unit:
            for part in _options_in(token):
                if any(part == d or part.startswith(d) for d in DENIED_FLAGS):
                    raise FlagRefused(
                        f"the flag {token!r} is not allowed: it makes the compiler run or write elsewhere"
                    )
                if TRIGRAPHS.fullmatch(part):
                    raise FlagRefused(f"the flag {token!r} is not allowed: it turns on trigraphs (`??=` read as "
                                      "`#`), and the host reads the sources as C++17 does, without them")  # fmt: skip
    return [token for unit in kept for token in unit]


def check_sources(sources: list[list[str]]) -> None:
    """`load(sources=...)` names: plain file names with a source suffix (no `..`, no `/`), each once."""
    names = [name for name, _ in sources]
    for name in names:
        if not SOURCE_NAME.fullmatch(name):
            raise FlagRefused(
                f"the source name {name[:80]!r} is not allowed: it must be a plain file name such as kernel.cu"
            )
    if len(set(names)) != len(names):
        raise FlagRefused("two sources have the same file name")


def check_functions(functions: list[str] | dict[str, str] | None) -> None:
    """`functions=` names and docstrings: plain data in the module definition torch writes into main.cpp."""
    named = functions if isinstance(functions, dict) else dict.fromkeys(functions or [], "")
    for name, docstring in named.items():
        if not FUNCTION_NAME.fullmatch(name):
            raise FlagRefused(
                f"the function name {name[:80]!r} is not allowed: it must be a C++ identifier (torch writes it into "
                "main.cpp as code)"
            )
        if LEAVES_THE_LITERAL.search(docstring):
            raise FlagRefused(
                f"the docstring of {name!r} is not allowed: a quote, backslash or control character in it would end "
                "its string in the main.cpp torch writes (it is not escaped there)"
            )


def scanned_text(request: dict[str, Any]) -> str:
    """Every C++ text of a request the compiler reads, for the scans of what was built: the sources, and the C++
    and CUDA flags' words, whose macros the preprocessor reads too (`-DCALL=<a name>` spells in the flags a name
    the sources never do)."""
    flags = [part for name in ("extra_cflags", "extra_cuda_cflags") for flag in request[name]
             for part in flag.replace("=", " ").replace(",", " ").split()]  # fmt: skip
    texts = [*request["cpp_sources"], *request["cuda_sources"], *(text for _, text in request["sources"])]
    return "\n".join([*texts, *flags])


def normalise(request: dict[str, Any]) -> dict[str, Any]:
    """The build a request asks for, checked and normalised; FlagRefused says what is not allowed."""
    spec = {k: v for k, v in request.items() if k != "event"}
    for name in FLAG_LISTS:
        spec[name] = normalise_flags(spec[name])
    check_link_flags(spec["extra_ldflags"])
    for path in spec["extra_include_paths"]:
        _safe_text("include path", path)
    spec["extra_include_paths"] = list(dict.fromkeys(p for p in spec["extra_include_paths"] if p.strip()))
    check_sources(spec["sources"])
    check_functions(spec["functions"])
    return spec


def uses_cuda(spec: dict[str, Any]) -> bool:
    return bool(spec["cuda_sources"]) or any(name.endswith(".cu") for name, _ in spec["sources"])


# PyTorch kernels called past the dispatcher (a backend's own entry `at::cpu::clamp_min`, `at::native::`, a
# `redispatch`): the runtime op count cannot see them, and C++ can spell the call any way it likes (a namespace
# alias, a using-declaration, a macro), so the symbols the built library imports are read instead.
PAST_THE_DISPATCHER = re.compile(r"\bat::(?:cpu|cuda|native|meta|composite\w*)::\w+|\bat::_ops::\w+::redispatch\b")
# Every PyTorch call from C++ that goes through the dispatcher, however the source spelt it (a pasted name, an
# operator: `x * 2` is `mul_Scalar`), lands in the dispatcher's entry for its operator.
DISPATCHED = re.compile(r"\bat::_ops::(\w+)::call\b")
# A function looked up by name while the library runs (`dlsym(RTLD_DEFAULT, "_ZN2at3cpu9clamp_min...")`, the name
# pieced together at runtime) is none of its imports: a library that can look functions up calls what nobody read.
RUNTIME_LOOKUP = re.compile(r"^\s*U (dlsym|dlvsym|dlopen|dlmopen|__libc_dlsym|__libc_dlopen_mode)\b", re.MULTILINE)
# The loader's lists of what is loaded are lookups too: `dl_iterate_phdr` hands over every library's dynamic section,
# whose symbol table finds `at::cpu::clamp_min` by its mangled name (a string literal) with no `dlsym` (redteam33);
# so do `_dl_find_object`, `dlinfo`, `dladdr` and the debugger's list (`_r_debug`). An unwinder linked in
# (`-static-libgcc`, allowed) imports `_dl_find_object` or `dl_iterate_phdr` too, and nothing tells its calls from the
# kernel's: the finding says which flag to drop.
LOADER_LISTS = re.compile(r"^\s*U (dl_iterate_phdr|_dl_find_object|dlinfo|dladdr1?|_r_debug)\b", re.MULTILINE)
# Python's import, eval and call machinery: a library that imports a module or calls a Python object reaches every
# PyTorch function by name (`torch.relu` through pybind11, the op count's dispatch mode turned off the same way),
# past every check of its text. pybind11's own glue imports none of these (none of 275 libraries built here did).
PYTHON_REACH = re.compile(
    r"^\s*U (PyImport_\w+|PyRun_\w+|Py_CompileString\w*|PyEval_EvalCode\w*|PyObject_Vectorcall\w*"
    r"|PyObject_CallMethod\w*|PyObject_CallObject|PyObject_CallNoArgs|PyObject_CallOneArg)\b",
    re.MULTILINE,
)
MAX_SYMBOL_TEXT = 4 << 20


def kernels_called_past_the_dispatcher(library: Path) -> list[str]:
    """The PyTorch compute among `library`'s undefined dynamic symbols (demangled by binutils' nm, which every
    machine that links an extension has; none found when it cannot run): kernels past the dispatcher, compute
    operators through it (the op count, in the candidate's process, can be blinded to those), and the dynamic
    loader's and Python's lookups (`dlsym`, `PyImport_ImportModule`), whose finds are called past every check."""
    try:
        listed = subprocess.run(["nm", "-D", "--undefined-only", "-C", str(library)], capture_output=True,
                                text=True, errors="replace", timeout=60, check=False).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    listed = listed[:MAX_SYMBOL_TEXT]
    found = [m.group(0) for m in PAST_THE_DISPATCHER.finditer(listed)]
    found += [f"at::_ops::{m.group(1)}" for m in DISPATCHED.finditer(listed) if compute_operator(m.group(1))]
    found += [f"{m.group(1)} (functions looked up by name at runtime)" for m in RUNTIME_LOOKUP.finditer(listed)]
    found += [f"{m.group(1)} (the loader's list of loaded libraries, whose symbol tables find any function; a "
              "statically linked unwinder imports it too: build without -static-libgcc or -static-libstdc++ under "
              "--strict)" for m in LOADER_LISTS.finditer(listed)]  # fmt: skip
    found += [f"{m.group(1)} (calls into Python: any PyTorch function by name)" for m in PYTHON_REACH.finditer(listed)]
    return list(dict.fromkeys(found))


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
    prelude_lines: int = 0  # a failed light build: where the candidate's CUDA sources start in cuda.cu
    binding: str = ""  # main.cpp's object: "compiled" here, or "reused" (a checked copy of an earlier build's)
    compiler_failed: bool = False  # the builder reported the compiler's errors (not its own failure)
    torch_calls: list[str] = field(default_factory=list)  # PyTorch compute its sources call (static_checks)

    def summary(self) -> dict[str, Any]:
        hidden = ("log", "compiler_errors", "prelude_lines", "compiler_failed")
        return {k: v for k, v in self.__dict__.items() if k not in hidden}


def _identity_or_none(path: Path) -> list[int] | None:
    try:
        return identity(path)
    except OSError:
        return None


# A C++ file `load` builds gets the precompiled header (`-include`, before its first line) only where its first line
# includes torch/extension.h anyway (load_inline's sources always do: it prepends that line): elsewhere the header
# would declare torch for a file that never includes it, or come before the macros it sets first, so that it built
# with a header in the cache and not without (tests/candidates/redteam21/files_without_the_torch_include.py).
TORCH_FIRST = re.compile(r"(?:\s|//[^\n]*|/\*.*?\*/)*#[ \t]*include[ \t]*[<\"]torch/extension\.h[>\"]", re.DOTALL)
CUDA_SUFFIXES = (".cu", ".cuh")  # nvcc's compile lines never get the header


def header_fits(spec: dict[str, Any]) -> bool:
    """Whether the precompiled header may come first in this build's C++ compiles without changing what they do."""
    return spec["kind"] != "files" or all(
        TORCH_FIRST.match(text) for name, text in spec["sources"] if not name.endswith(CUDA_SUFFIXES)
    )


class BuildBroker:
    def __init__(self, root: Path, sandbox: Sandbox, env: dict[str, str], limits: Limits, scratch: Path) -> None:
        self.root = root
        self.sandbox, self.env, self.limits, self.scratch = sandbox, env, limits, scratch
        self.root.mkdir(parents=True, exist_ok=True)
        self.last_log: Path | None = None  # the latest builder's log: its stages, stamped, as they happen
        self.pch_store = header_cache.store(self.root.parent)
        self.staging = header_cache.staging(self.root.parent)  # the trusted header step's fresh directories
        for directory in (self.pch_store, self.staging):
            directory.mkdir(parents=True, exist_ok=True)
        self.manifests = Manifests(self.root.parent / "manifests")
        self.bindings = BindingObjects(self.root, self.manifests)
        self.failed = FailedBuilds(self.manifests.root, env)
        sweep_staging(self.staging)

    def key(self, spec: dict[str, Any], versions: dict[str, Any]) -> str:
        payload = {**spec, **versions, "arch": self.env.get("TORCH_CUDA_ARCH_LIST", ""), "python": sys.version_info[:2]}
        if not header_fits(spec):  # not what a build with the header made before (or its remembered failure)
            payload["no_header"] = True
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def verify(self, directory: Path, name: str) -> dict[str, Any] | None:
        """The host's record of the entry if its library (hashed again, every time) still matches it; None
        if it is missing, unrecorded, altered or larger than a build may leave."""
        manifest = self.manifests.check(directory.name, directory / f"{name}.so")
        if manifest is not None and manifest.get("size", 0) > MAX_BUILD_BYTES:  # made before the bound: not used
            return None
        return manifest

    def libraries(self) -> dict[str, list[int] | None]:
        """Every cached library and its identity now: what `tampered` compares with, later. A build still in
        its staging directory (this process's or another's sharing the cache) is not in the cache yet: it
        moves away when done, which is no tampering."""
        return {str(p): _identity_or_none(p) for p in self.root.glob("*/*.so") if not p.parent.name.startswith(STAGING)}

    def tampered(self, before: dict[str, list[int] | None]) -> list[str]:
        """Libraries in the cache that changed since `before` and no longer match the host's record. Another
        kevin-tui sharing the cache may remove an entry or rebuild it (it moves the library in, then records
        it): a library gone is no tampering (a missing library is rebuilt, never loaded), and a changed one
        is given `SETTLE_S` to match its new record before it counts."""
        suspects = [path for path, known in before.items() if _identity_or_none(Path(path)) not in (known, None)]
        deadline = time.monotonic() + SETTLE_S
        while True:
            suspects = [path for path in suspects if self._unrecorded(Path(path))]
            if not suspects or time.monotonic() >= deadline:
                return suspects
            time.sleep(0.05)

    def _unrecorded(self, library: Path) -> bool:
        return library.exists() and self.manifests.check(library.parent.name, library) is None

    def build(self, request: dict[str, Any], versions: dict[str, Any], source: str, deadline: float) -> BuildRecord:
        """Build (or reuse) what a `build_request` event asks for. Raises WorkerTimeout past `deadline`."""
        name = request["name"]
        try:
            spec = normalise(request)
        except FlagRefused as exc:
            return BuildRecord(name, "", uses_cuda(request), False, ok=False, message=str(exc))
        if not (name.isidentifier() and len(name) <= MAX_NAME):
            return BuildRecord(
                name, "", uses_cuda(spec), False, ok=False, message=f"{name!r} is not a valid extension name"
            )
        key = self.key(spec, versions)
        directory = self.root / f"{name}-{key[:20]}"
        record = BuildRecord(name, str(directory), uses_cuda(spec), cached=False)
        if (manifest := self.verify(directory, name)) is not None:
            record.cached = True
            record.headers = manifest.get("headers", "standard")
            return record
        if (failure := self.failed.recall(directory.name)) is not None:
            record.ok, record.cached, record.log, record.headers = False, True, failure["log"], failure["headers"]
            record.message, record.prelude_lines = failure["message"], failure["prelude_lines"]
        else:
            started = time.perf_counter()
            try:
                self._run_builder(spec, versions, directory, record, deadline)
            finally:
                record.seconds = round(time.perf_counter() - started, 3)
            if record.compiler_failed:
                self.failed.remember(directory.name, vars(record))
        if not record.ok:
            files = _generated_files(spec, record.prelude_lines)
            record.compiler_errors = first_errors(record.log, SourceMap(source, files))
            record.message = with_hints(record.compiler_errors, record.log) or record.message
        return record

    def precompiled_header(self, spec: dict[str, Any], deadline: float) -> str:
        """The key of a checked precompiled header for this build's C++ flags, made first when missing by a
        trusted step (no candidate source; only its own fresh directory writable); '' for none. The step's
        answer for flags seen before is remembered while its header still matches the host's record."""
        if spec["no_implicit_headers"] and spec["kind"] != "files":
            return ""
        if not header_fits(spec):
            return ""
        flags = json.dumps([spec["extra_cflags"], spec["extra_include_paths"]])
        asked = (str(self.pch_store), json.dumps(self.env, sort_keys=True), self.sandbox.kind, flags)
        if (known := PCH_KEYS.get(asked)) and usable_pch(self.pch_store, known, self.manifests):
            return known  # the same flags as a build before: no trusted step (a worker start) to ask again
        key = self._make_precompiled_header(spec, deadline)
        if key:
            PCH_KEYS[asked] = key
        return key

    def _make_precompiled_header(self, spec: dict[str, Any], deadline: float) -> str:
        staging = self.staging / secrets.token_hex(8)
        staging.mkdir()
        binds = [Bind(str(self.pch_store)), Bind(str(staging), writable=True)]
        worker = WorkerProcess(
            "builder", self.scratch / f"pch-{staging.name}", self.env, self.sandbox, binds, self.limits
        )
        try:
            worker.send({"cmd": "pch", "extra_cflags": spec["extra_cflags"],
                         "include_paths": spec["extra_include_paths"], "directory": str(staging)})  # fmt: skip
            event = worker.event(deadline - time.monotonic())
            if event["event"] != "pch_key" or not re.fullmatch(r"[0-9a-f]{20}", key := event["key"]):
                return ""
            with open(header_cache.making_lock(self.staging, key), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # a build making this header right now: use it once made
                if usable_pch(self.pch_store, key, self.manifests):
                    return key
                if not admit(self.pch_store / key):
                    return ""
                worker.send({"cmd": "pch_build"})
                made = worker.event(deadline - time.monotonic())
                if made["event"] != "pch_built" or made["message"]:
                    return ""
                worker.kill()
                return key if install_pch(staging, self.pch_store, key, self.manifests) else ""
        except (WorkerGone, ProtocolViolation, OSError):
            return ""  # the header only ever saves time: build without it
        finally:
            worker.kill()
            remove_tree(staging)

    def _run_builder(
        self, spec: dict[str, Any], versions: dict[str, Any], directory: Path, record: BuildRecord, deadline: float
    ) -> None:
        pch_key = self.precompiled_header(spec, deadline)
        temporary = self.root / f"{STAGING}{directory.name}-{secrets.token_hex(4)}"
        temporary.mkdir()
        binding = ""
        if spec["kind"] == "inline" and reusable(spec):
            binding = binding_key(spec, uses_cuda(spec), pch_key, versions, self.env)
            record.binding = "reused" if self.bindings.provide(binding, temporary / OBJECT) else "compiled"
        scratch = self.scratch / f"builder-{temporary.name}"
        binds = [Bind(str(temporary), writable=True), Bind(str(self.pch_store))]
        limits = replace(self.limits, file_size=min(self.limits.file_size, MAX_BUILD_BYTES))
        worker = WorkerProcess("builder", scratch, self.env, self.sandbox, binds, limits)
        # The build directory lies in the cache on the host's disk: measured as the builder writes, not only once
        # it is done (object after object under the file-size limit, 300 MB each, filled the disk before that).
        worker.watch_scratch(MAX_BUILD_BYTES, temporary)
        self.last_log = worker.log_path
        try:
            worker.send({"cmd": "build", "spec": spec, "directory": str(temporary), "pch_store": str(self.pch_store),
                         "pch_key": pch_key, "binding_object": record.binding == "reused"})  # fmt: skip
            event = worker.event(deadline - time.monotonic())
        except (WorkerGone, ProtocolViolation) as exc:
            record.ok, record.message = False, f"the builder {exc}"
            if worker.over_scratch:
                record.message = (f"the builder was stopped: {worker.over_scratch}; a build may leave at most "
                                  f"{MAX_BUILD_BYTES / 2**20:.0f} MB in the build cache")  # fmt: skip
            record.log = worker.log_tail() + (f"\n{record.message}" if worker.over_scratch else "")  # its last line
            remove_tree(temporary)
            return
        except WorkerTimeout:
            remove_tree(temporary)
            raise
        finally:
            worker.kill()
            if self.last_log == worker.log_path:
                self.last_log = None  # its stages are shown while it runs; then the candidate's log again
        self._finish(event, spec, temporary, directory, record)
        if record.ok and record.binding == "compiled":
            self.bindings.remember(binding, directory)

    def _finish(self, event: dict, spec: dict, temporary: Path, directory: Path, record: BuildRecord) -> None:
        kind = event["event"]
        if kind == "environment_error":
            remove_tree(temporary)
            raise EnvironmentProblem(event["message"])
        record.headers = event.get("headers", "standard")
        record.prelude_lines = event.get("prelude_lines", 0)
        library = temporary / f"{spec['name']}.so"
        if kind != "built" or not library.is_file():
            remove_tree(temporary)
            record.ok, record.compiler_failed = False, kind == "build_failed"
            record.log = event.get("log") or event.get("traceback") or ""
            record.message = event.get("message", "the build produced no library")
            return
        if (size := directory_bytes(temporary)) > MAX_BUILD_BYTES:
            remove_tree(temporary)
            record.ok = False
            record.message = (f"the build left {size / 2**20:.0f} MB (a build may leave at most "
                              f"{MAX_BUILD_BYTES / 2**20:.0f} MB in the build cache)")  # fmt: skip
            return
        try:
            os.rename(temporary, directory)
        except OSError:  # built meanwhile by someone else, or a leftover: keep a verified one, else replace
            if self.verify(directory, spec["name"]) is None:
                remove_tree(directory)
                os.rename(temporary, directory)
            else:
                remove_tree(temporary)
                return
        self.manifests.record(directory.name, directory / f"{spec['name']}.so", name=spec["name"],
                              headers=record.headers)  # fmt: skip


def _generated_files(spec: dict[str, Any], prelude_lines: int = 0) -> dict[str, GeneratedFile]:
    """The files load_inline generated; `prelude_lines`: a light build's (its own prelude, one include in main.cpp)."""
    implicit = not spec["no_implicit_headers"]
    cpp_lines, cuda_lines = (1, prelude_lines) if prelude_lines else (CPP_HEADER_LINES, CUDA_HEADER_LINES)
    files = {"main.cpp": GeneratedFile(cpp_lines if implicit else 0, spec["cpp_sources"])}
    if spec["cuda_sources"]:
        files["cuda.cu"] = GeneratedFile(cuda_lines if implicit else 0, spec["cuda_sources"])
    for name, text in spec["sources"]:
        files[name] = GeneratedFile(0, [text])
    return files
