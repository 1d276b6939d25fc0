"""How fast the hardware allows a problem to run, and how close the reference and the candidate get.

The reference worker counts the reference's floating-point work (torch's FlopCounterMode: matmuls and
convolutions; elementwise work counts as memory traffic) and the least memory traffic (inputs,
outputs, parameters and buffers, each moved once). With the device's peak figures, the least time is
the larger of bytes/bandwidth and flops/peak, given for the FP32 peak and the tensor-core peak.

That bound is the *reference's* work: a candidate may legitimately do less (a chain of operators that
simplifies algebraically, a reduction that makes a matmul a matrix-vector product), so a time below it
is a warning that asks for the diff to be read. Only a time below what no correct kernel can beat is
`rejected`: writing the outputs once at the device's bandwidth, and on CUDA one kernel launch. On the
CPU, where small outputs stay in cache, both are warnings.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Peaks:
    """Peak figures of one device: memory bandwidth (GB/s), FP32 and dense tensor-core TFLOP/s."""

    bandwidth_gbs: float
    fp32_tflops: float
    tensor_tflops: float
    source: str


# Dense (no sparsity) figures from NVIDIA's datasheets; tensor cores: BF16/FP16.
GPUS = {
    "H200": Peaks(4800, 67, 989, "NVIDIA H200 datasheet (SXM): 4.8 TB/s HBM3e, 67 TF FP32, 989 TF BF16"),
    "H100 PCIe": Peaks(2000, 51, 756, "NVIDIA H100 datasheet (PCIe): 2.0 TB/s, 51 TF FP32, 756 TF BF16"),
    "H100 NVL": Peaks(3900, 60, 835, "NVIDIA H100 datasheet (NVL): 3.9 TB/s, 60 TF FP32, 835 TF BF16"),
    "H100": Peaks(3350, 67, 989, "NVIDIA H100 datasheet (SXM): 3.35 TB/s HBM3, 67 TF FP32, 989 TF BF16"),
    "B200": Peaks(8000, 80, 2250, "NVIDIA DGX B200 datasheet, per GPU: 8 TB/s, 80 TF FP32, 2.25 PF BF16"),
    "A100-SXM4-80GB": Peaks(2039, 19.5, 312, "NVIDIA A100 datasheet (80GB SXM): 2.04 TB/s, 19.5 TF FP32, 312 TF BF16"),
    "A100-PCIE-40GB": Peaks(1555, 19.5, 312, "NVIDIA A100 datasheet (40GB PCIe): 1.56 TB/s, 19.5 TF FP32, 312 TF"),
    "A100": Peaks(1935, 19.5, 312, "NVIDIA A100 datasheet (80GB PCIe): 1.94 TB/s, 19.5 TF FP32, 312 TF BF16"),
    "L40S": Peaks(864, 91.6, 362, "NVIDIA L40S datasheet: 864 GB/s, 91.6 TF FP32, 362 TF BF16"),
    "RTX 4090": Peaks(1008, 82.6, 165, "NVIDIA Ada whitepaper (RTX 4090): 1008 GB/s, 82.6 TF FP32, 165 TF FP16"),
}


def gpu_peaks(name: str, overrides: dict[str, dict] | None = None) -> Peaks | None:
    """Peaks for a device name as torch reports it ('NVIDIA H200'), config overrides first."""
    for key, figures in (overrides or {}).items():
        if key.lower() in name.lower():
            return Peaks(**{"source": f"configuration ({key})", **figures})
    for key, peaks in GPUS.items():  # most specific names first in the table
        if key.lower() in name.lower():
            return peaks
    return None


def cpu_key(threads: int) -> str:
    return f"{platform.processor() or platform.machine()}|{_cpu_model()}|threads={threads}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def cached_cpu_peaks(cache: Path, key: str) -> Peaks | None:
    try:
        return Peaks(**json.loads(cache.read_text())[key])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store_cpu_peaks(cache: Path, key: str, peaks: Peaks) -> None:
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    known[key] = asdict(peaks)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(known, indent=1))


@dataclass
class Bound:
    flops: float
    bytes: float
    peaks: Peaks

    @property
    def memory_ms(self) -> float:
        return self.bytes / (self.peaks.bandwidth_gbs * 1e9) * 1e3

    def compute_ms(self, tensor_cores: bool) -> float:
        peak = self.peaks.tensor_tflops if tensor_cores else self.peaks.fp32_tflops
        return self.flops / (peak * 1e12) * 1e3

    def least_ms(self, tensor_cores: bool = True) -> float:
        """The least time: memory-bound or compute-bound, whichever is slower (tensor cores by default:
        the most a kernel could use, so the bound never wrongly rejects)."""
        return max(self.memory_ms, self.compute_ms(tensor_cores))

    def evidence(self, reference_ms: float | None, candidate_ms: float | None) -> dict[str, Any]:
        least = self.least_ms()
        found = {
            "flops": self.flops,
            "bytes": self.bytes,
            "bound_ms": least,
            "bound_fp32_ms": self.least_ms(tensor_cores=False),
            "limited_by": "memory" if self.memory_ms >= self.compute_ms(True) else "compute",
            "peaks": asdict(self.peaks),
        }
        if reference_ms:
            found["reference_fraction"] = least / reference_ms
        if candidate_ms:
            found["candidate_fraction"] = least / candidate_ms
        return found

    def line(self) -> str:
        """One line for the model's first prompt."""
        what = (
            f"{self.bytes / 1e6:.1f} MB at {self.peaks.bandwidth_gbs:.0f} GB/s"
            if self.memory_ms >= self.compute_ms(True)
            else f"{self.flops / 1e9:.2f} GFLOP at {self.peaks.tensor_tflops:.0f} TFLOP/s"
        )
        limited = "memory" if self.memory_ms >= self.compute_ms(True) else "compute"
        least = self.least_ms()
        return f"The least time this problem can take on this device is {least:.4f} ms ({limited}-bound: {what})."


# A time below this share of the bound cannot be real (the table's figures are rounded; clocks vary).
IMPOSSIBLE_SHARE = 0.8


LAUNCH_FLOOR_MS = 0.002  # one CUDA kernel launch, end to end: no GPU result arrives sooner


def impossible(bound: Bound, candidate_ms: float) -> bool:
    return candidate_ms < IMPOSSIBLE_SHARE * bound.least_ms()


def output_floor_ms(peaks: Peaks, output_bytes: int, device: str) -> float:
    """The least time any correct kernel needs: its outputs written once (and one launch on CUDA; none where nothing
    need be written: the reference's output is a view of its input, and so may a kernel's be)."""
    floor = output_bytes / (peaks.bandwidth_gbs * 1e9) * 1e3
    return max(floor, LAUNCH_FLOOR_MS) if device.startswith("cuda") and output_bytes else floor


@dataclass(frozen=True)
class Finding:
    rejected: bool
    message: str


def against_the_bound(
    bound: Bound, output_bytes: int, device: str, candidate_ms: float, reference_ms: float | None
) -> Finding | None:
    """What a candidate time says against the bounds: None, a warning, or (CUDA, below the output floor) a rejection."""
    floor = output_floor_ms(bound.peaks, output_bytes, device)
    if candidate_ms < IMPOSSIBLE_SHARE * floor:
        figures = (f"{candidate_ms:.4f} ms, but writing its {output_bytes / 1e6:.2f} MB of outputs alone takes "
                   f"{floor:.4f} ms here ({bound.peaks.source})")  # fmt: skip
        if device.startswith("cuda") and not (reference_ms is not None and reference_ms < IMPOSSIBLE_SHARE * floor):
            return Finding(True, f"faster than any correct kernel can be: {figures}")
        if device.startswith("cuda"):  # the reference itself beat it: the floor does not hold for this problem
            return Finding(False, f"timed below the time to write the outputs: {figures}; the reference was too, "
                           f"at {reference_ms:.4f} ms, so its outputs need not all be written")  # fmt: skip
        return Finding(False, f"timed below the time to write the outputs: {figures}; on the CPU the outputs "
                       "may have stayed in cache between calls")  # fmt: skip
    if not impossible(bound, candidate_ms):
        return None
    if reference_ms is not None and impossible(bound, reference_ms):
        return None  # the trusted reference beats it too: its data stays in this CPU's caches, or it does less work
        # than its inputs' and outputs' bytes say (a view returned: tests/test_redteam28.py), so the bound says nothing
    return Finding(False, (
        f"faster than the reference's work allows: {candidate_ms:.4f} ms, but the reference's "
        f"{bound.bytes / 1e6:.1f} MB and {bound.flops / 1e9:.2f} GFLOP take at least {bound.least_ms():.4f} ms here "
        f"({bound.peaks.source}): an algebraic shortcut, or a cheat — check the diff"
    ))  # fmt: skip


def describe(evidence: dict[str, Any]) -> str:
    """'reference at 12% of speed of light, candidate at 61% (bound 0.0210 ms, memory-bound)'."""
    parts = []
    for who in ("reference", "candidate"):
        if (fraction := evidence.get(f"{who}_fraction")) is not None:
            parts.append(
                f"{who} at {fraction:.0%}" if fraction <= 1 else f"{who} faster than the bound ({fraction:.1f}x)"
            )
    text = (
        ", ".join(parts) + f" of speed of light (bound {evidence['bound_ms']:.4f} ms, {evidence['limited_by']}-bound)"
    )
    if any(evidence.get(f"{who}_fraction", 0) > 1 for who in ("reference", "candidate")):
        text += "; above 100%: the data stays in cache between calls"
    return text
