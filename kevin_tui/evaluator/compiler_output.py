"""Turning compiler output into the first errors, with lines that point into the candidate.

load_inline writes the sources to `main.cpp` (after one implicit include line)
and `cuda.cu` (after three), so a compiler line number is shifted and refers
to a generated file. `SourceMap` undoes that using the string constants of the
candidate file.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from dataclasses import dataclass

NVCC_ERROR = re.compile(r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?:catastrophic )?error:?\s*(?P<msg>.*)$")
GCC_ERROR = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.*)$")
LINK_ERROR = re.compile(r"(undefined reference to .*|undefined symbol: .*|ld: .*|collect2: .*)$")
NVCC_FATAL = re.compile(r"^(?:nvcc fatal|ptxas fatal|fatal error)\s*:\s*(?P<msg>.*)$")
GENERATED_REF = re.compile(r"(?:^|/)(main\.cpp|cuda\.cu)[:(](\d+)")
MANGLED = re.compile(r"\b_Z[\w$.]+")
MAX_ERRORS = 8
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 and C1 controls but tab and newline: escapes


def printable(text: str) -> str:
    """Compiler output on a candidate's sources, safe to show in a terminal: control characters (terminal
    escape sequences start with one) dropped, tabs as spaces, newlines kept."""
    return CONTROL.sub("", text.replace("\t", " "))


# APIs that older kernels (and models trained on them) still use, with what to write instead.
REMOVED_APIS = (
    (re.compile(r"DeprecatedTypeProperties"),
     "AT_DISPATCH_* takes x.scalar_type(), not x.type() (x.type() was removed from the dispatch macros)"),
    (re.compile(r"no (?:member|matching function).*\bdata\b|'data' is deprecated|\.data<"),
     "use tensor.data_ptr<T>() instead of tensor.data<T>()"),
    (re.compile(r"THC/THC\.h|THCudaCheck|THCState"),
     "the THC headers are gone: use ATen/cuda/CUDAContext.h and C10_CUDA_CHECK"),
    (re.compile(r"redefinition of .*PyInit_|multiple definition of .*PyInit_|PYBIND11_MODULE.*redefin"),
     "load_inline writes the PYBIND11_MODULE itself when you pass functions=[...]: remove yours, or pass no functions"),
    (re.compile(r"Unsupported gpu architecture"),
     "this nvcc does not support that architecture: drop -arch/-gencode flags and let TORCH_CUDA_ARCH_LIST decide"),
)  # fmt: skip


@dataclass
class GeneratedFile:
    """One file load_inline generated: how many implicit lines precede the sources."""

    header_lines: int
    sources: list[str]

    def locate(self, line: int) -> tuple[int, int] | None:
        """(source index, 1-based line within it) for a line of the generated file."""
        offset = line - self.header_lines
        for index, text in enumerate(self.sources):
            count = text.count("\n") + 1
            if 1 <= offset <= count:
                return index, offset
            offset -= count
        return None


# What ast.parse raises on text it cannot read as Python: a syntax error and, for code nested deeper than the parser
# or the interpreter's stack allow (a candidate's 3,000-term expression), RecursionError or MemoryError.
PARSE_ERRORS = (SyntaxError, RecursionError, MemoryError, ValueError)


class SourceMap:
    """Maps (generated file, line) to a line of the candidate's Python file."""

    def __init__(self, candidate_source: str, files: dict[str, GeneratedFile]) -> None:
        self.files = files
        self.constants: dict[str, int] = {}
        try:
            tree = ast.parse(candidate_source)
        except PARSE_ERRORS:
            return
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.constants.setdefault(node.value, node.lineno)

    def candidate_line(self, file_name: str, line: int) -> int | None:
        generated = self.files.get(file_name)
        where = generated.locate(line) if generated else None
        if generated is None or where is None:
            return None
        index, line_in_source = where
        start = self.constants.get(generated.sources[index])
        return None if start is None else start + line_in_source - 1


def first_errors(output: str, source_map: SourceMap | None = None) -> list[dict]:
    """The first compiler or linker errors in build output, de-duplicated, in order."""
    errors: list[dict] = []
    seen: set[tuple] = set()
    last_own: int | None = None  # the candidate's line named most recently (an error inside a header
    for raw in output.splitlines():  # is usually reported just after the line of the source that caused it)
        line = raw.strip()
        if source_map is not None and (own := GENERATED_REF.search(line)):
            last_own = source_map.candidate_line(own[1], int(own[2])) or last_own
        match = NVCC_ERROR.match(line) or GCC_ERROR.match(line)
        if match:
            path, lineno, msg = match["file"], int(match["line"]), match["msg"].strip()
            name = path.rsplit("/", 1)[-1]
            entry = {"file": name, "line": lineno, "message": msg}
            if source_map is not None:
                entry["candidate_line"] = source_map.candidate_line(name, lineno) or last_own
        elif fatal := NVCC_FATAL.match(line):
            entry = {"file": None, "line": None, "message": f"fatal: {fatal['msg'].strip()}"}
        elif link := LINK_ERROR.search(line):
            entry = {"file": None, "line": None, "message": demangle(link[1])}
        else:
            continue
        key = (entry["file"], entry["line"], entry["message"])
        if key not in seen:
            seen.add(key)
            errors.append(entry)
        if len(errors) >= MAX_ERRORS:
            break
    return errors


def format_error(entry: dict) -> str:
    where = entry.get("file") or "link"
    if entry.get("line") is not None:
        where += f":{entry['line']}"
    if entry.get("candidate_line"):
        where += f" (candidate line {entry['candidate_line']})"
    return f"{where}: {entry['message']}"


def demangle(text: str) -> str:
    """Mangled C++ names in `text` followed by their readable form (c++filt, when installed)."""
    names = sorted(set(MANGLED.findall(text)))
    if not names or shutil.which("c++filt") is None:
        return text
    try:
        out = subprocess.run(["c++filt", *names], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return text
    for name, readable in zip(names, out.stdout.splitlines(), strict=False):
        if readable != name:
            text = text.replace(name, f"{name} ({readable})")
    return text


def hints(log: str) -> list[str]:
    """One-line fixes for errors whose cause is a removed or misused API."""
    return [hint for pattern, hint in REMOVED_APIS if pattern.search(log)]


def with_hints(errors: list[dict], log: str) -> str:
    """The build's first error as one line a model can act on, with the fix when one is known."""
    first = format_error(errors[0]) if errors else ""
    if not first:
        tail = [line.strip() for line in log.strip().splitlines() if line.strip()]
        first = tail[-1][:300] if tail else ""
    found = hints(log)
    return first + (f" (hint: {found[0]})" if found else "")
