"""Turning compiler output into the first errors, with lines that point into the candidate.

load_inline writes the sources to `main.cpp` (after one implicit include line)
and `cuda.cu` (after three), so a compiler line number is shifted and refers
to a generated file. `SourceMap` undoes that using the string constants of the
candidate file.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

NVCC_ERROR = re.compile(r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?:catastrophic )?error:?\s*(?P<msg>.*)$")
GCC_ERROR = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.*)$")
LINK_ERROR = re.compile(r"(undefined reference to .*|undefined symbol: .*|ld: .*|collect2: .*)$")
MAX_ERRORS = 8


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


class SourceMap:
    """Maps (generated file, line) to a line of the candidate's Python file."""

    def __init__(self, candidate_source: str, files: dict[str, GeneratedFile]) -> None:
        self.files = files
        self.constants: dict[str, int] = {}
        try:
            tree = ast.parse(candidate_source)
        except SyntaxError:
            return
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.constants.setdefault(node.value, node.lineno)

    def candidate_line(self, file_name: str, line: int) -> int | None:
        generated = self.files.get(file_name)
        where = generated.locate(line) if generated else None
        if where is None:
            return None
        index, line_in_source = where
        start = self.constants.get(generated.sources[index])
        return None if start is None else start + line_in_source - 1


def first_errors(output: str, source_map: SourceMap | None = None) -> list[dict]:
    """The first compiler or linker errors in build output, de-duplicated, in order."""
    errors: list[dict] = []
    seen: set[tuple] = set()
    for raw in output.splitlines():
        line = raw.strip()
        match = NVCC_ERROR.match(line) or GCC_ERROR.match(line)
        if match:
            path, lineno, msg = match["file"], int(match["line"]), match["msg"].strip()
            name = path.rsplit("/", 1)[-1]
            entry = {"file": name, "line": lineno, "message": msg}
            if source_map is not None:
                entry["candidate_line"] = source_map.candidate_line(name, lineno)
        elif link := LINK_ERROR.search(line):
            entry = {"file": None, "line": None, "message": link[1]}
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
