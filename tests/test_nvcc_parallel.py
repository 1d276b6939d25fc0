"""nvcc_parallel.py (nvcc's host and device steps side by side) against plain nvcc, with real compiles:
the same device code, the same host code, the same messages and status when the source is wrong."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kevin_tui.evaluator.worker import nvcc_parallel
from tests.test_builds import needs_nvcc

pytestmark = [needs_nvcc, pytest.mark.nvcc]

NVCC = str(Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc")
# torch's cuda_cflags for one arch (build.ninja), less its include paths, and the builder's -lineinfo
FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "--expt-relaxed-constexpr",
    "-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC", "-lineinfo", "-std=c++17",
]  # fmt: skip
KERNEL = r"""
#include <cuda_fp16.h>
#include <cstdio>
template <int BLOCK>
__global__ void softmax_rows(const float* __restrict__ x, __half* y, int cols) {
    __shared__ float partial[BLOCK];
    const float* row = x + blockIdx.x * cols;
    float m = -1e30f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, row[c]);
    partial[threadIdx.x] = m;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
        __syncthreads();
    }
    for (int c = threadIdx.x; c < cols; c += BLOCK) y[blockIdx.x * cols + c] = __float2half(expf(row[c] - partial[0]));
}
namespace { __device__ int hits; }
void launch(const float* x, __half* y, int rows, int cols) {
    softmax_rows<256><<<rows, 256>>>(x, y, cols);
    if (cudaGetLastError() != cudaSuccess) std::printf("launch failed\n");
}
"""


def compile_both(tmp_path: Path, source: str, flags: list[str] = FLAGS) -> dict[str, tuple[int, str, Path]]:
    """The same source compiled in the same directory (nvcc names the source in its messages and line
    tables) by plain nvcc and by the driver, each with the depfile that ninja asks for."""
    (tmp_path / "cuda.cu").write_text(source)
    results = {}
    for name, command in (("nvcc", [NVCC]), ("parallel", [sys.executable, nvcc_parallel.__file__, NVCC])):
        out = tmp_path / f"{name}.o"
        run = subprocess.run(
            [*command, "-MD", "-MF", f"{out}.d", *flags, "-c", "cuda.cu", "-o", out.name],
            cwd=tmp_path, capture_output=True, text=True,
        )  # fmt: skip
        results[name] = (run.returncode, run.stdout + run.stderr, out)
    return results


def scratch_names(text: str) -> str:
    """Messages with nvcc's scratch files (`/tmp/tmpxft_<pid>_00000000-6_cuda.ptx`) unnamed: they differ
    between any two runs of nvcc."""
    return re.sub(r"\S*tmpxft_[0-9a-f]+_[0-9a-f]+-", "<scratch>-", text)


def section(obj: Path, name: str) -> bytes:
    dump = obj.with_suffix(f".{name.strip('.')}")
    subprocess.run(["objcopy", "-O", "binary", f"--only-section={name}", str(obj), str(dump)], check=True)
    return dump.read_bytes()


def host_code(obj: Path) -> str:
    """The disassembly, less the object's name and the static-initialiser symbol named after nvcc's
    scratch file (tmpxft_<pid>_...), which differs between any two runs of nvcc itself."""
    text = subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    return "\n".join(line for line in text.splitlines()[2:] if "tmpxft_" not in line)


def test_the_device_and_host_code_are_plain_nvccs(tmp_path):
    results = compile_both(tmp_path, KERNEL)
    (nvcc_rc, nvcc_out, nvcc_o), (rc, out, parallel_o) = results["nvcc"], results["parallel"]
    assert nvcc_rc == rc == 0 and out == nvcc_out, out
    fatbin = section(parallel_o, ".nv_fatbin")
    assert len(fatbin) > 1000 and fatbin == section(nvcc_o, ".nv_fatbin")  # the cubin, byte for byte
    assert host_code(parallel_o) == host_code(nvcc_o)
    depfile = Path(f"{parallel_o}.d").read_text()
    assert depfile.startswith("parallel.o: cuda.cu") and "cuda_fp16.h" in depfile  # what ninja's deps read


def test_the_steps_run_side_by_side_with_their_own_module_ids(tmp_path):
    """The plan: cudafe++ and cicc in different chains, each writing the module id, compared at the end."""
    (tmp_path / "cuda.cu").write_text(KERNEL)
    plan = nvcc_parallel.plan(NVCC, [*FLAGS, "-c", str(tmp_path / "cuda.cu"), "-o", "x.o"], tmp_path)
    assert plan is not None
    assert [nvcc_parallel.tool(s.command) for s in plan.host] == ["gcc", "cudafe++"]
    assert [nvcc_parallel.tool(s.command) for s in plan.device] == ["gcc", "cicc", "ptxas", "fatbinary", "rm"]
    (cudafe_id, cicc_id), = plan.module_ids  # fmt: skip
    assert f'--gen_module_id_file --module_id_file_name "{cicc_id}"' in plan.device[1].command
    assert str(cudafe_id) in plan.host[1].command and str(cicc_id) not in plan.host[1].command


@pytest.mark.parametrize(
    "broken",
    [
        "__global__ void k(float* y) { y[0] = undefined_name; }\nint f( {",  # the front ends' errors
        '__global__ void k() { asm volatile("not_an_instruction;"); }',  # ptxas's, on the device chain only
    ],
)
def test_a_broken_source_gets_nvccs_own_messages_and_status(tmp_path, broken):
    results = compile_both(tmp_path, broken)
    (nvcc_rc, nvcc_out, _), (rc, out, parallel_o) = results["nvcc"], results["parallel"]
    assert nvcc_rc != 0 and rc == nvcc_rc
    assert "error" in out and scratch_names(out) == scratch_names(nvcc_out)
    assert not parallel_o.exists()


def test_other_ids_or_shapes_run_plain_nvcc(tmp_path, monkeypatch):
    """Different module ids (here: cicc's copy written elsewhere) make the driver run nvcc as it is, once;
    a command line that is no single compile (-E) runs nvcc as it is without a word."""
    (tmp_path / "cuda.cu").write_text(KERNEL)
    args = [*FLAGS, "-c", "cuda.cu", "-o", "x.o"]
    monkeypatch.chdir(tmp_path)
    plan = nvcc_parallel.plan(NVCC, args, tmp_path)
    assert plan is not None
    cicc = plan.device[1]
    cicc.command = cicc.command.replace(str(plan.module_ids[0][1]), str(tmp_path / "elsewhere"))
    assert nvcc_parallel.run_parallel(plan) is None
    assert nvcc_parallel.plan(NVCC, [*FLAGS, "-E", "cuda.cu", "-o", "x.ii"], tmp_path) is None
