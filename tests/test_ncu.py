"""The Nsight Compute digest: parsing ncu's CSV, its refusals, and the pass's plumbing in the sandbox.

ncu cannot run here (no GPU, not installed), so the plumbing test runs the real candidate worker in
the real sandbox under a stand-in that behaves like ncu from the outside: it runs the command after
its options with the worker's descriptors intact, then writes CSV in ncu's format to --log-file.
scripts/gpu-check.sh runs the real thing when a GPU is lent.
"""

from __future__ import annotations

import stat
import sys

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host import ncu
from kevin_tui.evaluator.report import evidence_lines
from kevin_tui.protocol.notes import profile_note
from tests.conftest import candidate, sandbox_here

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def row(kernel_id: int, name: str, metric: str, unit: str, value: str) -> str:
    return (f'"{kernel_id}","4242","python3","127.0.0.1","{name}","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')  # fmt: skip


def ncu_log(kernels: dict[str, dict[str, str]]) -> str:
    lines = ["==PROF== Connected to process 4242 (/usr/bin/python3.11)", HEADER]
    for kernel_id, (name, values) in enumerate(kernels.items()):
        lines += [row(kernel_id, name, metric, "", value) for metric, value in values.items()]
    return "\n".join([*lines, "==PROF== Disconnected from process 4242", ""])


RELU_KERNEL = {
    "gpu__time_duration.sum": "12,352",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "87.5",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "91.2",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "14.03",
    "launch__registers_per_thread": "16",
    "launch__shared_mem_per_block_static": "0",
    "launch__shared_mem_per_block_dynamic": "2048",
    ncu.stall_metric("long_scoreboard"): "21.4",
    ncu.stall_metric("wait"): "1.2",
    ncu.stall_metric("lg_throttle"): "3.5",
    ncu.stall_metric("barrier"): "0",
    ncu.stall_metric("drain"): "n/a",
}


def test_the_digest_reads_ncus_csv_per_kernel():
    text = ncu_log({"relu_kernel(float const*, float*, int)": RELU_KERNEL, "other_kernel()": {
        "gpu__time_duration.sum": "800", "sm__throughput.avg.pct_of_peak_sustained_elapsed": "60"}})  # fmt: skip
    first, second = ncu.parse_log(text)
    assert first.name == "relu_kernel(float const*, float*, int)"
    assert first.duration_ns == 12352 and first.occupancy_pct == 87.5 and first.memory_pct == 91.2
    assert first.registers == 16 and first.shared_dynamic_bytes == 2048
    assert list(first.stalls) == ["long_scoreboard", "lg_throttle", "wait"]  # the top three, largest first
    assert second.compute_pct == 60 and second.occupancy_pct is None and second.stalls == {}
    line = first.line()
    assert "12.4 us" in line and "occupancy 88%, memory 91%, compute 14% of peak" in line
    assert "16 registers/thread, 2.0 KiB shared/block" in line and "stalls: long_scoreboard 21.4" in line


def test_ncus_refusals_become_a_reason_a_user_can_act_on(tmp_path):
    log = tmp_path / "ncu.csv"
    log.write_text("==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n")
    assert "NVreg_RestrictProfilingToAdminUsers" in ncu.evidence(log)["skipped"]
    log.write_text("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n")
    assert "no kernel" in ncu.evidence(log)["skipped"]
    assert ncu.evidence(tmp_path / "missing.csv") == {"skipped": "ncu gave no output"}


def test_a_driver_that_lets_only_administrators_profile_is_named_in_the_reason(tmp_path, monkeypatch):
    params = tmp_path / "params"
    monkeypatch.setattr(ncu, "DRIVER_PARAMS", params)
    assert ncu.profiling_admin_only() is None  # no driver here: nothing is claimed
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\nEnableMSI: 1\n")
    assert ncu.profiling_admin_only() is True
    log = tmp_path / "ncu.csv"
    log.write_text("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance\n")
    assert "RmProfilingAdminOnly: 1" in ncu.evidence(log)["skipped"] and "--sandbox off" in ncu.evidence(log)["skipped"]
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert ncu.profiling_admin_only() is False and "RmProfilingAdminOnly" not in ncu.evidence(log)["skipped"]


def test_the_tool_is_found_only_where_it_can_run(tmp_path):
    assert ncu.find_ncu("off") is None
    assert ncu.find_ncu(str(tmp_path / "nowhere" / "ncu")) is None
    tool = tmp_path / "ncu"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert ncu.find_ncu(str(tool)) == str(tool)
    prefix = ncu.command_prefix(str(tool), tmp_path / "log.csv")
    assert prefix[0] == str(tool) and f"{ncu.RANGE}/" in prefix and "--csv" in prefix
    assert ncu.stall_metric("long_scoreboard") in prefix[prefix.index("--metrics") + 1]


STAND_IN = '''#!{python}
"""Stands in for ncu: runs the command after its options, keeping descriptors, then writes the CSV."""
import os, sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
command = args[args.index("--log-file") + 2:]
pid = os.fork()
if pid == 0:
    os.execv(command[0], command)
_, status = os.waitpid(pid, 0)
with open(log, "w") as f:
    f.write({text!r})
sys.exit(os.waitstatus_to_exitcode(status))
'''


@pytest.mark.parametrize("sandbox", ["bwrap", "unshare"])
def test_the_ncu_pass_runs_the_worker_under_the_tool_in_the_sandbox(tmp_path, build_cache, relu_problem, sandbox):
    tool_dir = tmp_path / "nsight-compute"
    tool_dir.mkdir()
    tool = tool_dir / "ncu"
    tool.write_text(STAND_IN.format(python=sys.executable, text=ncu_log({"relu_kernel": RELU_KERNEL})))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    options = EvalOptions(device="cpu", timing=False, sandbox=sandbox_here(sandbox), cache_dir=build_cache)
    source = candidate("relu_cpp.py")
    with Evaluator(relu_problem, options) as evaluator:
        verdict = evaluator.evaluate(source)
        assert verdict.status is Status.CORRECT, verdict.message
        found = ncu.ncu_pass(evaluator.tool_run, str(tool), evaluator.reference_sample(), source)
    assert found["kernels"][0]["name"] == "relu_kernel", found
    assert found["kernels"][0]["memory_pct"] == 91.2
    lines = evidence_lines({"ncu": found})
    assert lines and lines[0].startswith("  ncu: relu_kernel; 12.4 us")
    assert "Nsight Compute, per kernel: relu_kernel" in profile_note({"profile": {"ops": []}, "ncu": found})


def test_a_worker_that_dies_under_the_tool_gives_a_reason_not_a_crash(tmp_path, build_cache, relu_problem):
    tool = tmp_path / "ncu"
    tool.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - no permission' > \"$(echo \"$@\" | "
                    "sed 's/.*--log-file \\([^ ]*\\).*/\\1/')\"\nexit 1\n")  # fmt: skip
    tool.chmod(0o755)
    options = EvalOptions(device="cpu", timing=False, cache_dir=build_cache)
    source = candidate("relu_cpp.py")
    with Evaluator(relu_problem, options) as evaluator:
        assert evaluator.evaluate(source).status is Status.CORRECT
        found = ncu.ncu_pass(evaluator.tool_run, str(tool), evaluator.reference_sample(), source)
    assert "ERR_NVGPUCTRPERM" in found["skipped"]


def test_the_pass_profiles_inputs_from_the_reference_not_the_candidates_scratch(tmp_path, build_cache, relu_problem):
    """ncu_inputs_rewritten.py replaces its scratch's first-trial inputs with a 1x1 tensor; the pass runs on a sample
    the host read from the reference worker's outbox, at the problem's size."""
    tool = tmp_path / "ncu"
    tool.write_text(STAND_IN.format(python=sys.executable, text=ncu_log({"relu_kernel": RELU_KERNEL})))
    tool.chmod(0o755)
    options = EvalOptions(device="cpu", timing=False, ncu=str(tool), cache_dir=build_cache)
    source = candidate("ncu_inputs_rewritten.py")
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate(source)
        assert verdict.status is Status.CORRECT, verdict.message
        scratch = evaluator.fresh_scratch("ncu")
        evaluator.nsight(verdict, source, scratch, progress=False)
        seen = set((scratch / "shapes-seen.txt").read_text().split())
    assert verdict.evidence["ncu"]["kernels"][0]["name"] == "relu_kernel", verdict.evidence
    assert seen and "(1, 1)" not in seen, seen
