"""The compute-sanitizer gate: one forward call of a correct CUDA kernel under each of the tools
memcheck, racecheck, initcheck and synccheck; any finding makes the verdict `incorrect`.

Like the Nsight Compute pass (host/ncu.py), each tool runs a fresh candidate worker inside the same
sandbox, the tool's front end first on the command line, on fresh inputs from the reference; the
builds come from the cache (built with -lineinfo, so a finding names the source line). PyTorch's
caching allocator is off in that worker: memcheck sees a write past a tensor's end only when the
tensor is an allocation of its own, and initcheck sees a read of never-written memory only in a
fresh one. The tool runs in the candidate's process, which can detect it: the gate catches the
kernel's mistakes, not a kernel that hides them on purpose.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.host import decisions
from kevin_tui.evaluator.host.candidate_run import Decided, OpenToolRun
from kevin_tui.evaluator.host.reference import ReferenceLost
from kevin_tui.evaluator.host.tools import find_tool, install_binds, read_log
from kevin_tui.evaluator.host.workers import WorkerGone, WorkerTimeout
from kevin_tui.evaluator.protocol import ProtocolViolation
from kevin_tui.evaluator.verdict import EnvironmentProblem, Status, Verdict

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
AT_ACCEPT = "accept"  # the default choice: every tool, at accept time only
MAX_LOG_BYTES = 4 << 20
EXIT_TIMEOUT_S = 300.0
PREFIX = "========="
LOG = "sanitizer.log"  # in the tool's run's scratch
NOT_FINDINGS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY", "Target application",
                "Saved host backtrace", "Host Frame", "Device Frame", "Warning: Race")  # fmt: skip
WORKER_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}

# "at relu_kernel(const float *, float *, long)+0x70 in /tmp/x/main.cu:12" (2022 on), or the older
# "at 0x70 in /tmp/x/main.cu:12:relu_kernel(const float *, float *, long)"; " in FILE:LINE" only with -lineinfo
AT_NEW = re.compile(r"\bat (?P<kernel>.+?)\+0x[0-9a-fA-F]+(?: in (?P<file>[^\s:]+):(?P<line>\d+))?\s*$")
AT_OLD = re.compile(r"\bat 0x[0-9a-fA-F]+ in (?:(?P<file>[^\s:]+):(?P<line>\d+):)?(?P<kernel>.+?)\s*$")


def parse_choice(text: str) -> str:
    """`--sanitize off|accept|TOOL[,TOOL...]`, normalised; ValueError names what is wrong."""
    text = text.strip().lower()
    if text in ("off", AT_ACCEPT):
        return text
    tools = [t.strip() for t in text.split(",") if t.strip()]
    if text == "all":
        tools = list(TOOLS)
    unknown = [t for t in tools if t not in TOOLS]
    if not tools or unknown:
        raise ValueError(f"unknown sanitizer tool {', '.join(unknown) or repr(text)}: choose from off, accept, all "
                         f"or a comma list of {', '.join(TOOLS)}")  # fmt: skip
    return ",".join(dict.fromkeys(tools))


def tools_for(choice: str, at_accept: bool) -> tuple[str, ...]:
    """The tools to run for `choice` at this point: every correct verdict, or accept time."""
    if choice == "off":
        return ()
    if choice == AT_ACCEPT:
        return TOOLS if at_accept else ()
    return tuple(choice.split(","))


def find_sanitizer() -> str | None:
    """compute-sanitizer from PATH or the CUDA toolkit, or None."""
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    return find_tool("compute-sanitizer", [f"{cuda}/compute-sanitizer/compute-sanitizer"])


def command_prefix(sanitizer: str, tool: str, log: Path) -> list[str]:
    """What goes before the worker's own command line. API errors are left out: PyTorch probes the
    runtime with calls that fail on purpose, and a kernel's fault is reported at the kernel."""
    return [sanitizer, "--tool", tool, "--target-processes", "all", "--report-api-errors", "no",
            "--show-backtrace", "device", "--print-limit", "20", "--log-file", str(log)]  # fmt: skip


def scratch_prefix(sanitizer: str, tool: str, scratch: Path) -> list[str]:
    return command_prefix(sanitizer, tool, scratch / LOG)


@dataclass
class Finding:
    tool: str
    what: str  # the tool's own words: "Invalid __global__ write of size 4 bytes"
    kernel: str | None = None
    file: str | None = None
    line: int | None = None
    detail: str = ""  # the lines after the location: thread, block, address

    def describe(self) -> str:
        """One line in the candidate's terms: what, in which kernel, at which line."""
        where = f" in {self.kernel}" if self.kernel else ""
        if self.file:
            where += f" at {os.path.basename(self.file)}:{self.line}"
        elif self.kernel:
            where += " (no line: built without -lineinfo)"
        detail = f" ({self.detail})" if self.detail else ""
        return f"compute-sanitizer {self.tool}: {self.what}{where}{detail}"


def _location(text: str) -> tuple[str | None, str | None, int | None]:
    for pattern in (AT_OLD, AT_NEW):
        if match := pattern.search(text):
            line = match.group("line")
            return match.group("kernel").strip(), match.group("file"), int(line) if line else None
    return None, None, None


def parse_log(text: str, tool: str) -> list[Finding]:
    """The findings in a compute-sanitizer log: each starts at an unindented line after the prefix;
    its `at` line names the kernel (and the line with -lineinfo). Racecheck's warnings (hazards the
    tool itself rates benign, such as two writes of one value) and the summaries are not findings."""
    findings: list[Finding] = []
    current: Finding | None = None
    for raw in text.splitlines():
        if not raw.startswith(PREFIX):
            continue
        body = raw[len(PREFIX) :]
        stripped = body.strip()
        if not stripped:
            current = None
            continue
        indented = body.startswith("  ")
        if not indented:
            current = None
            if stripped.startswith(NOT_FINDINGS) or stripped.startswith("Program hit"):
                continue
            head, _, rest = stripped.partition(" at ")  # racecheck: "Error: Race reported between ... at K+0x in F:L"
            current = Finding(tool, head.removeprefix("Error: ").strip())
            if rest:
                current.kernel, current.file, current.line = _location("at " + rest)
            findings.append(current)
            continue
        if current is None or stripped.startswith(NOT_FINDINGS):
            continue
        if current.kernel is None and (stripped.startswith("at ") or " at " in stripped):  # "Read Thread (0,0,0) at"
            current.kernel, current.file, current.line = _location(stripped)
        elif stripped.startswith(("by thread", "Address", "Access", "and ")) and len(current.detail) < 200:
            current.detail = "; ".join(filter(None, [current.detail, stripped]))
    return findings


def error_count(text: str) -> int | None:
    """The tool's own count (`ERROR SUMMARY: 3 errors`, racecheck's `(2 errors, 1 warning)`), if given."""
    if match := re.search(r"\((\d+) errors?, \d+ warnings?\)", text) or re.search(r"ERROR SUMMARY: (\d+) error", text):
        return int(match.group(1))
    return None


def tool_result(log: Path, tool: str, failure: str | None) -> dict[str, Any]:
    """One tool's entry: its findings, or why it did not run to the end. A log that counts errors
    the parser could not read still fails the gate, with the tool's own lines as the finding."""
    text = read_log(log, MAX_LOG_BYTES)
    findings = parse_log(text, tool)
    count = error_count(text)
    if not findings and count:
        lines = [line[len(PREFIX) :].strip() for line in text.splitlines() if line.startswith(PREFIX)]
        findings = [Finding(tool, f"{count} error(s) reported", detail=" / ".join(filter(None, lines))[:200])]
    entry: dict[str, Any] = {"findings": [asdict(f) for f in findings]}
    if failure and not findings:
        entry["failure"] = failure[:300]
    if count is None and not findings:
        tail = [line for line in text.splitlines() if line.strip()][-3:]
        entry["skipped"] = "compute-sanitizer gave no summary" + (f": {' / '.join(tail)[:300]}" if tail else "")
    return entry


def first_finding(result: dict[str, Any]) -> Finding | None:
    for tool in result.get("tools", {}).values():
        if tool.get("findings"):
            return Finding(**tool["findings"][0])
    return None


def apply(verdict: Verdict, result: dict[str, Any]) -> None:
    """Record the pass as evidence; a finding makes a correct verdict incorrect, with the first one."""
    verdict.evidence["sanitizer"] = result
    if verdict.status is Status.CORRECT and (finding := first_finding(result)):
        decisions.overrule(verdict, decisions.Finding.SANITIZER, finding.describe(), "unsanitized_status")


def summary(result: dict[str, Any]) -> str:
    """One line for a report or an accept message."""
    if "skipped" in result:
        return f"not sanitized: {result['skipped']}"
    if finding := first_finding(result):
        return finding.describe()
    tools = result.get("tools", {})
    unfinished = {t: e.get("failure") or e["skipped"] for t, e in tools.items() if e.get("failure") or e.get("skipped")}
    clean = [t for t in tools if t not in unfinished]
    text = f"compute-sanitizer: clean under {', '.join(clean) or 'no tool'}"
    if unfinished:
        text += "; did not finish: " + "; ".join(f"{t} ({why})" for t, why in unfinished.items())
    return text


def run_tool(open_run: OpenToolRun, sanitizer: str, tool: str, inputs: bytes, source: str) -> dict[str, Any]:
    """One forward call under one tool, in a fresh sandboxed worker."""
    run = open_run(f"sanitize-{tool}", source, partial(scratch_prefix, sanitizer, tool), install_binds(sanitizer),
                   WORKER_ENV)  # fmt: skip
    worker, scratch = run.worker, run.scratch
    log = scratch / LOG
    failure = None
    try:
        run.files.write("candidate.py", source.encode())
        run.files.write("in-0.kt", inputs)
        run.load()
        run.enter("sanitize")
        worker.send({"cmd": "sanitize", "inputs": str(scratch / "in-0.kt")})
        run.expect("sanitized")
        worker.send({"cmd": "exit"})
    except Decided as decided:  # a kernel that faults under memcheck: the log says where
        failure = decided.verdict.message
    except (WorkerGone, WorkerTimeout, ProtocolViolation, EnvironmentProblem, ReferenceLost, OSError) as exc:
        failure = str(exc) or type(exc).__name__
    try:
        worker.proc.wait(timeout=EXIT_TIMEOUT_S)  # the tool writes its summary when the process has exited
    except subprocess.TimeoutExpired:
        failure = failure or f"the worker did not exit within {EXIT_TIMEOUT_S:.0f} s under the tool"
    finally:
        worker.kill()
    return tool_result(log, tool, failure)


def sanitize_pass(open_run: OpenToolRun, sanitizer: str, tools: tuple[str, ...], inputs: bytes, source: str) -> dict:
    """Every tool in turn; stops at the first that finds something (one finding decides)."""
    results: dict[str, Any] = {}
    for tool in tools:
        results[tool] = run_tool(open_run, sanitizer, tool, inputs, source)
        if results[tool]["findings"]:
            break
    return {"tools": results}
