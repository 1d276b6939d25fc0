"""Red team 21: precision evidence, build flags and the remembered build failures (tests/candidates/redteam21/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, PROBLEMS

HERE = CANDIDATES / "redteam21"


@pytest.fixture(scope="module")
def float64_problem(build_cache):
    """One evaluator on tests/problems/relu_and_sums_float64.py, untimed."""
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(load_problem(PROBLEMS / "relu_and_sums_float64.py"), options, prespawn=False) as evaluator:
        yield evaluator


@pytest.mark.parametrize(
    ("name", "flagged"), [("float64_problem_in_float32", True), ("honest_float64_reordered", False)]
)
def test_a_float64_problem_computed_in_float32_is_lower_precision(float64_problem, name, flagged):
    """float64_problem_in_float32.py: float32's rounding (6e-8) sits inside float64's 1e-7, and the precision
    evidence skipped float64 outputs, so it was `correct` with no evidence and no warning. The float64 reference is
    that output's truth now; a float64 kernel summing in another order uses ~0 of the tolerance."""
    verdict = float64_problem.evaluate((HERE / f"{name}.py").read_text())
    assert verdict.status is Status.CORRECT, verdict.message
    precision = verdict.evidence.get("precision")
    assert precision is not None and precision["reference"] == 0
    assert ("lower_precision" in {w.code for w in verdict.warnings}) is flagged, precision
    assert (precision["candidate"] > 0.1) is flagged


@pytest.fixture(scope="module")
def complex_problem(build_cache):
    """One evaluator on tests/problems/complex_product.py, untimed."""
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(load_problem(PROBLEMS / "complex_product.py"), options, prespawn=False) as evaluator:
        yield evaluator


@pytest.mark.parametrize(("name", "flagged"), [("complex_output_narrowed", True), ("honest_complex_output", False)])
def test_a_complex_output_computed_narrower_is_lower_precision(complex_problem, name, flagged):
    """complex_output_narrowed.py: a complex64 product of inputs cut to 17 bits passed the judge (part by part
    inside 1e-4) with no precision evidence (complex outputs were skipped); its parts are measured now, 0.22 of
    the tolerance where the reference uses 0.002. The product written out in float32 uses what the reference does."""
    verdict = complex_problem.evaluate((HERE / f"{name}.py").read_text())
    assert verdict.status is Status.CORRECT, verdict.message
    precision = verdict.evidence.get("precision")
    assert precision is not None, "no precision evidence for a complex output"
    assert ("lower_precision" in {w.code for w in verdict.warnings}) is flagged, precision


WRONG_COMPLEX_SUM = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a):
        return torch.view_as_complex(a.double().sum(1)).to(torch.complex64) + 0.2
"""


def test_a_complex_output_more_exact_than_the_reference_passes_and_a_wrong_one_fails(build_cache):
    """honest_complex_exact_sum.py: exact row sums where float32 rounds (z + 1e4) - 1e4 by ~0.02 were `incorrect`
    (50 of 128 values outside tolerance): the float64 fallback judged real tensors only. Part by part now, and
    0.2 off the exact sums (~15x the reference's typical own error, ~0.013) is still outside it: 0.05 off, 4x it,
    was inside for most inputs, before the error was drawn again too (own_error.py) as after."""
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(load_problem(PROBLEMS / "complex_rounded_sum.py"), options, prespawn=False) as evaluator:
        honest = evaluator.evaluate((HERE / "honest_complex_exact_sum.py").read_text())
        wrong = evaluator.evaluate(WRONG_COMPLEX_SUM)
    assert honest.status is Status.CORRECT, honest.message
    assert wrong.status is Status.INCORRECT, wrong.message


def _driver_says(tmp_path: Path, tool: str, script: str, source: str, *command: str) -> str:
    """What a real compiler driver prints for `command` on `source` (name, newline, text) when its `tool` (ld, or
    nvcc's host compiler) is a script, as torch's build log shows it."""
    import subprocess

    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    (fake / tool).write_text(f"#!/bin/sh\n{script}\n")
    (fake / tool).chmod(0o755)
    name, text = source.split("\n", 1)
    (tmp_path / name).write_text(text)
    done = subprocess.run([*command, name], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr + "\nninja: build stopped: subcommand failed.\n"


PROGRAM = "m.cpp\nint main() { return 0; }\n"
LINKER = [
    "kill -9 $$",
    'ulimit -f 1; exec /usr/bin/ld "$@"',
    "echo 'ld: cannot open output file m: Disk quota exceeded' >&2; exit 1",
]


def test_a_tool_killed_by_a_signal_or_an_os_error_is_no_remembered_compiler_error(tmp_path):
    """A linker killed (the out-of-memory killer, a file-size limit) printed "collect2: fatal error: ld terminated
    with signal 9 [Killed]", which none of the unstable markers named: remembered as the compiler's own error, the
    same honest build failed at once ever after, though it would build with the memory back. Every signal and
    every errno text is the machine's state now; the compiler's own errors (real g++) are still remembered."""
    import shutil

    from kevin_tui.evaluator.host.failed_builds import deterministic

    link = ["g++", f"-B{tmp_path}/fake", "-o", "m"]
    killed = [_driver_says(tmp_path, "ld", script, PROGRAM, *link) for script in LINKER]
    assert "ld terminated with signal 9 [Killed]" in killed[0] and "signal 25" in killed[1], killed
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if Path(nvcc).exists():
        cuda = "k.cu\n__global__ void k() {}\n"
        said = _driver_says(tmp_path, "g++", "kill -9 $$", cuda, nvcc, "-ccbin", f"{tmp_path}/fake/g++", "-c")
        assert "died due to signal 9" in said, said
        killed.append(said)
    assert not any(deterministic(log) for log in killed), killed
    errors = [
        "e1.cpp\nint f() { return undeclared_name; }\n",
        'e2.cpp\nstatic_assert(sizeof(int) == 3, "no");\n',
        "e3.cpp\n#error the kernel needs sm_90\n",
        "e4.cpp\nint main() { return undefined_function(); }\n",  # a link error: ld's own, remembered
    ]
    for source in errors:
        log = _driver_says(tmp_path, "unused", "", source, "g++", "-o", "e")
        assert "error" in log and deterministic(log), log


@pytest.fixture(scope="module")
def relu(relu_problem, build_cache):
    """One evaluator on ReLU, untimed."""
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("files_without_the_torch_include", Status.COMPILE_ERROR),
        ("honest_files_with_the_torch_include", Status.CORRECT),
    ],
)
def test_the_precompiled_header_never_makes_a_file_build_that_does_not(relu, name, status):
    """files_without_the_torch_include.py: its file never includes torch/extension.h, and was `correct` because the
    builder's `-include` of the cached header declared torch for it (a compile error where no header was cached,
    and that failure remembered by a key that does not say which). A file gets the header only where it starts by
    including torch/extension.h itself; one that does is built as before."""
    verdict = relu.evaluate((HERE / f"{name}.py").read_text())
    assert verdict.status is status, verdict.message
    if status is Status.COMPILE_ERROR:
        assert "torch" in verdict.message and "does not name a type" in verdict.message, verdict.message


def test_only_a_file_that_includes_torch_first_gets_the_header_and_every_other_key_stays():
    """The header goes where the file's own first line would include it anyway (comments and blank lines before
    it allowed); a load_inline build (its sources start with that line) and such a file keep their keys."""
    from kevin_tui.evaluator.host.builds import header_fits

    def files(*texts: str) -> dict:
        return {"kind": "files", "sources": [[f"f{i}.cpp", t] for i, t in enumerate(texts)] + [["k.cu", "x"]]}

    assert header_fits({"kind": "inline", "sources": []})
    assert header_fits(files("#include <torch/extension.h>\n", '// a\n/* b\n */\n # include "torch/extension.h"'))
    for text in ("torch::Tensor f();", "#define NDEBUG\n#include <torch/extension.h>", "#include <vector>\n"):
        assert not header_fits(files("#include <torch/extension.h>", text)), text
