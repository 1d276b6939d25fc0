"""Nsight Compute (`ncu`) digest of a correct CUDA kernel: occupancy, throughput, stalls, resources.

A separate candidate worker runs under `ncu` inside the same sandbox, calls forward once to warm up
and once inside an NVTX range; ncu profiles only the kernels launched in that range (it replays each
several times, so the pass is slow and never part of timing) and writes its CSV to a log file. The
candidate's process and ncu share the sandbox, so the digest is evidence for the user and the model,
never an input to the verdict.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from kevin_tui.evaluator.host.candidate_run import Decided, OpenToolRun
from kevin_tui.evaluator.host.reference import ReferenceLost
from kevin_tui.evaluator.host.tools import find_tool, install_binds, read_log
from kevin_tui.evaluator.host.workers import WorkerGone, WorkerTimeout
from kevin_tui.evaluator.protocol import ProtocolViolation
from kevin_tui.evaluator.verdict import EnvironmentProblem

RANGE = "kevin-forward"  # the NVTX range the worker opens around the profiled call
LOG = "ncu.csv"  # in the pass's scratch
MAX_KERNELS = 12
MAX_LOG_BYTES = 8 << 20
TIMEOUT_S = 300.0

# digest field -> ncu metric (names as in Nsight Compute's own sections; see its Profiling Guide)
METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "compute_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "registers": "launch__registers_per_thread",
    "shared_static_bytes": "launch__shared_mem_per_block_static",
    "shared_dynamic_bytes": "launch__shared_mem_per_block_dynamic",
}
STALL_REASONS = (
    "long_scoreboard", "short_scoreboard", "mio_throttle", "lg_throttle", "tex_throttle", "wait", "barrier",
    "membar", "math_pipe_throttle", "not_selected", "dispatch_stall", "branch_resolving", "no_instruction",
    "drain", "imc_miss", "sleeping",
)  # fmt: skip


def stall_metric(reason: str) -> str:
    """Cycles a warp spends stalled for `reason`, per issued instruction."""
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


# What ncu says when it may not profile, and what the user can do about it.
REFUSALS = {
    "ERR_NVGPUCTRPERM": "ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM): an "
    "administrator can allow it (NVreg_RestrictProfilingToAdminUsers=0), or run with --ncu off",
    "No kernels were profiled": "ncu profiled no kernel in the forward call (a kernel launched outside "
    "the CUDA runtime, or none at all)",
}


@dataclass
class KernelDigest:
    name: str
    duration_ns: float | None = None
    occupancy_pct: float | None = None
    memory_pct: float | None = None
    compute_pct: float | None = None
    registers: float | None = None
    shared_static_bytes: float | None = None
    shared_dynamic_bytes: float | None = None
    stalls: dict[str, float] = field(default_factory=dict)  # the top three, cycles per issued instruction

    def line(self) -> str:
        """One line per kernel, in the order a kernel engineer reads it."""

        def pct(value: float | None) -> str:
            return "?" if value is None else f"{value:.0f}%"

        parts = [self.name[:80]]
        if self.duration_ns is not None:
            parts.append(f"{self.duration_ns / 1e3:.1f} us")
        parts.append(f"occupancy {pct(self.occupancy_pct)}, memory {pct(self.memory_pct)}, "
                     f"compute {pct(self.compute_pct)} of peak")  # fmt: skip
        if self.registers is not None:
            shared = (self.shared_static_bytes or 0) + (self.shared_dynamic_bytes or 0)
            parts.append(f"{self.registers:.0f} registers/thread, {shared / 1024:.1f} KiB shared/block")
        if self.stalls:
            parts.append("stalls: " + ", ".join(f"{r} {c:.1f}" for r, c in self.stalls.items()))
        return "; ".join(parts)


def find_ncu(choice: str) -> str | None:
    """The ncu to use for `--ncu auto|off|PATH`, or None."""
    if choice == "off":
        return None
    if choice != "auto":
        return choice if os.access(choice, os.X_OK) else None
    return find_tool("ncu", map(str, sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"))))


def command_prefix(ncu: str, log: Path) -> list[str]:
    """What goes before the worker's own command line."""
    metrics = [*METRICS.values(), *map(stall_metric, STALL_REASONS)]
    return [
        ncu, "--target-processes", "all", "--nvtx", "--nvtx-include", f"{RANGE}/",
        "--metrics", ",".join(metrics), "--print-units", "base", "--csv",
        "--launch-count", str(MAX_KERNELS), "--log-file", str(log),
    ]  # fmt: skip


def scratch_prefix(ncu: str, scratch: Path) -> list[str]:
    return command_prefix(ncu, scratch / LOG)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_log(text: str) -> list[KernelDigest]:
    """The kernels in ncu's CSV output (one row per kernel and metric; ncu's own lines are skipped)."""
    rows = [line for line in text.splitlines() if line.startswith('"')]
    by_id: dict[str, dict[str, str]] = {}
    names: dict[str, str] = {}
    for row in csv.DictReader(rows):
        kernel_id, metric = row.get("ID"), row.get("Metric Name")
        if kernel_id is None or metric is None:
            continue
        names.setdefault(kernel_id, row.get("Kernel Name") or "?")
        by_id.setdefault(kernel_id, {})[metric] = row.get("Metric Value") or ""
    digests = []
    for kernel_id, values in by_id.items():
        digest = KernelDigest(names[kernel_id])
        for name, metric in METRICS.items():
            setattr(digest, name, _number(values.get(metric, "")))
        stalls = {r: v for r in STALL_REASONS if (v := _number(values.get(stall_metric(r), ""))) is not None}
        digest.stalls = dict(sorted(stalls.items(), key=lambda item: -item[1])[:3])
        digests.append(digest)
    return digests[:MAX_KERNELS]


DRIVER_PARAMS = Path("/proc/driver/nvidia/params")
ADMIN_ONLY = (
    " (this driver lets only administrators profile, RmProfilingAdminOnly: 1, and a sandboxed worker is never "
    "one; --sandbox off would profile, with the candidate unsandboxed)"
)


def profiling_admin_only(params: Path | None = None) -> bool | None:
    """Whether the driver lets only administrators read the performance counters (its
    RmProfilingAdminOnly, set by NVreg_RestrictProfilingToAdminUsers); None when it cannot be read.

    A sandboxed worker is root of a user namespace of its own, never an administrator of the machine,
    so no capability the sandbox could keep would help: with this set, ncu is refused in any sandbox."""
    try:
        text = (params or DRIVER_PARAMS).read_text()
    except OSError:
        return None
    match = re.search(r"^RmProfilingAdminOnly:\s*(\d+)", text, re.MULTILINE)
    return None if match is None else match.group(1) != "0"


def refusal(text: str) -> str | None:
    """Why ncu produced nothing, in words a user can act on (None when it did not say)."""
    for marker, why in REFUSALS.items():
        if marker in text:
            if marker == "ERR_NVGPUCTRPERM" and profiling_admin_only():
                why += ADMIN_ONLY
            return why
    return None


def evidence(log: Path, failure: str | None = None) -> dict:
    """The `ncu` entry of a verdict's evidence: kernels, or why there are none (`failure`: how the pass
    itself ended, when it did not end well)."""
    text = read_log(log, MAX_LOG_BYTES)
    if kernels := parse_log(text):
        return {"kernels": [asdict(k) for k in kernels]}
    if why := refusal(text) or (failure and f"the ncu pass failed: {failure}"):
        return {"skipped": why}
    tail = [line for line in text.splitlines() if line.startswith("==")][-3:]
    return {"skipped": "ncu gave no metrics: " + " / ".join(tail) if tail else "ncu gave no output"}


def evidence_lines(entry: dict) -> list[str]:
    """The digest for a report or a note, one line per kernel."""
    if "skipped" in entry:
        return [f"Nsight Compute: {entry['skipped']}"]
    return [KernelDigest(**kernel).line() for kernel in entry.get("kernels", [])]


def ncu_pass(open_run: OpenToolRun, tool: str, inputs: bytes, source: str, scratch: Path | None = None) -> dict:
    """Run the (already correct) candidate once more under ncu, in a fresh sandboxed worker (in `scratch`: a
    caller that may cancel it kills what runs there), on the first trial's inputs; its builds come from the
    cache. The `ncu` evidence entry."""
    run = open_run("ncu", source, partial(scratch_prefix, tool), install_binds(tool), scratch=scratch)
    worker, scratch = run.worker, run.scratch
    log = scratch / LOG
    try:
        run.files.write("candidate.py", source.encode())
        run.files.write("in-0.kt", inputs)
        run.load()
        run.enter("ncu")
        worker.send({"cmd": "ncu", "inputs": str(scratch / "in-0.kt"), "range": RANGE})
        run.expect("ncu_done")
        worker.send({"cmd": "exit"})
        worker.proc.wait(timeout=TIMEOUT_S)  # ncu writes its results when the profiled process has exited
    except (
        Decided,
        WorkerGone,
        WorkerTimeout,
        ProtocolViolation,
        EnvironmentProblem,
        ReferenceLost,
        subprocess.TimeoutExpired,
        OSError,
    ) as exc:  # evidence only: it never changes the verdict
        return evidence(log, str(exc))
    finally:
        worker.kill()
    return evidence(log)
