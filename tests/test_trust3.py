"""Trust, third round (issue 19 items 3, 5, 6, 8; issue 20 item 6): the attacks in tests/candidates/trust3,
each of which got a wrong verdict from the evaluator before these fixes, and their honest counterparts.

The protocol charges the candidate (an environment problem it claims, a deadline it keeps alive, a name
too large, a path outside its scratch); builds cannot write where they should not (flags, source names,
linker options, the manifests; the precompiled headers are test_builds', beside the cold build that makes
the headers their attack aims at); static checks see through names; a correct kernel must agree with
itself, is measured against a float64 reference, and must follow in-place changes of its inputs and
parameters.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.evaluator.host.builds import FlagRefused, normalise
from kevin_tui.evaluator.host.scratch import WorkerFiles
from kevin_tui.evaluator.host.static_checks import run_static_checks
from kevin_tui.evaluator.protocol import ProtocolViolation
from kevin_tui.problem import load_problem
from tests.conftest import CANDIDATES, KERNELBENCH, candidate

TRUST3 = CANDIDATES / "trust3"
GEMM = KERNELBENCH / "level2" / "12_Gemm_Multiply_LeakyReLU.py"


def trust3(name: str) -> str:
    return (TRUST3 / f"{name}.py").read_text()


@pytest.fixture(scope="module")
def checking(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, shapes="off", cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


# -- the protocol charges the candidate ---------------------------------------------------------------


def test_an_environment_problem_claimed_after_import_is_the_candidates_runtime_error(checking):
    verdict = checking.evaluate(trust3("env_error_after_import"))
    assert verdict.status is Status.RUNTIME_ERROR and "environment problem" in verdict.message, verdict.message
    assert checking.evaluate(candidate("relu_cpp.py")).status is Status.CORRECT


def test_build_requests_do_not_restart_the_import_deadline(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, shapes="off", timeout_s=3, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        evaluator.evaluate(candidate("relu_cpp.py"))  # relu_ext built: each request below is answered at once
        verdict = evaluator.evaluate(trust3("import_keepalive_builds"))
    assert verdict.status is Status.TIMEOUT and "load phase" in verdict.message, verdict.message


def test_a_huge_run_name_is_refused_where_it_enters_and_the_reference_survives(checking):
    verdict = checking.evaluate(trust3("huge_run_name"))
    # the bound where the name enters, or (since the worker's recording functions are watched) the tripwire
    # on the function the attack replaces to send it: either way the candidate's verdict, not the reference's
    assert (verdict.status is Status.INCORRECT and "unusable" in verdict.message) or (
        verdict.status is Status.REJECTED and "write_record" in verdict.message
    ), verdict.message
    assert not verdict.details.get("reference_lost")
    reference = checking.reference
    assert checking.evaluate(candidate("relu_cpp.py")).status is Status.CORRECT
    assert checking.reference is reference  # never taken for broken


def test_an_extension_name_too_long_for_a_directory_is_a_compile_error(checking):
    verdict = checking.evaluate(trust3("long_extension_name"))
    assert verdict.status is Status.COMPILE_ERROR and "not a valid extension name" in verdict.message


def test_the_host_never_moves_a_file_it_is_told_to_outside_the_workers_scratch(relu_problem, build_cache):
    victim = Path(f"/tmp/kevin-trust3-victim-{os.getuid()}.txt")
    victim.write_text("the user's file")
    try:
        options = EvalOptions(device="cpu", timing=False, shapes="warn", cache_dir=build_cache)
        with Evaluator(relu_problem, options, prespawn=False) as evaluator:
            verdict = evaluator.evaluate(trust3("shape_path_escape"))
        assert verdict.status is Status.REJECTED and "own directory" in verdict.message, verdict.message
        assert victim.read_text() == "the user's file"
    finally:
        victim.unlink(missing_ok=True)


def test_worker_files_take_only_the_expected_plain_file_from_the_workers_own_directory(tmp_path):
    worker, inbox = tmp_path / "worker", tmp_path / "inbox"
    worker.mkdir(), inbox.mkdir()
    files, host = WorkerFiles(worker), WorkerFiles(inbox)
    (tmp_path / "secret").write_text("x")
    (worker / "out-0.kt").symlink_to(tmp_path / "secret")
    (worker / "out-1.kt").write_text("y")
    os.link(worker / "out-1.kt", tmp_path / "elsewhere")
    (worker / "out-2.kt").write_text("z")
    for reported, expected in ((str(tmp_path / "secret"), "out-0.kt"), (str(worker / "out-0.kt"), "out-0.kt"),
                               (str(worker / "out-1.kt"), "out-1.kt"), (str(worker / "out-2.kt"), "out-3.kt"),
                               (f"{worker}/../secret", "secret")):  # fmt: skip
        with pytest.raises(ProtocolViolation):
            files.move_to(reported, host, "taken.kt", expected)
    assert files.move_to(str(worker / "out-2.kt"), host, "taken.kt", "out-2.kt").read_text() == "z"
    assert (tmp_path / "secret").read_text() == "x"
    files.write("in-0.kt", b"inputs")  # replaces a planted link instead of writing through it
    (worker / "in-1.kt").symlink_to(tmp_path / "secret")
    files.write("in-1.kt", b"inputs")
    assert (tmp_path / "secret").read_text() == "x" and not (worker / "in-1.kt").is_symlink()


# -- builds that cannot write where they should not -----------------------------------------------------


def request(**changes) -> dict:
    base = {"kind": "inline", "name": "k", "cpp_sources": [""], "cuda_sources": [], "sources": [], "functions": None,
            "extra_cflags": [], "extra_cuda_cflags": [], "extra_ldflags": [], "extra_include_paths": [],
            "with_cuda": None, "no_implicit_headers": False}  # fmt: skip
    return {**base, **changes}


@pytest.mark.parametrize(
    "changes",
    [
        {"extra_cflags": ["-O2\ncxx = sh -c 'id' sh"]},
        {"extra_cflags": ["-DX=$HOME"]},
        {"extra_cflags": ["-O2;printf x>main.o"]},  # ninja runs each command with /bin/sh -c
        {"extra_cuda_cflags": ["-O3", "-DX=`id`"]},
        {"extra_cuda_cflags": ["-O3|sh"]},
        {"extra_include_paths": ["/usr/include&&sh"]},
        {"extra_cuda_cflags": ["-O3\rbuild x: phony"]},
        {"extra_include_paths": ["/usr/include\ncxx = sh"]},
        {"extra_cflags": ["-fdump-final-insns=/tmp/x"]},
        {"extra_ldflags": ["-Wl,-Map=/tmp/pwn.map"]},
        {"extra_ldflags": ["-Wl,--dependency-file=/tmp/x"]},
        {"extra_ldflags": ["-Wl,-rpath,/x,-Map,/tmp/y"]},
        {"extra_ldflags": ["--print-map"]},
        {"kind": "files", "sources": [["../../pch/k/torch_extension_pch.h", "#error"]]},
        {"kind": "files", "sources": [["/cache/pch/k/torch_extension_pch.h.gch", "x"]]},
        {"kind": "files", "sources": [["kernel.cu", "a"], ["kernel.cu", "b"]]},
        {"kind": "files", "sources": [["kernel$x.cpp", "a"]]},
    ],
)
def test_a_build_that_could_write_elsewhere_is_refused(changes):
    with pytest.raises(FlagRefused):
        normalise(request(**changes))


def test_ordinary_flags_link_options_and_sources_pass():
    spec = normalise(
        request(
            kind="files",
            sources=[["kernel.cu", ""], ["binding.cpp", ""]],
            extra_cflags=["-O3", "-DN=4", "-std=c++17"],
            extra_cuda_cflags=["-O3", "--use_fast_math", "-gencode", "arch=compute_90,code=sm_90"],
            extra_ldflags=[
                "-lcublas",
                "-L/usr/local/cuda/lib64",
                "-Wl,-rpath,/usr/local/cuda/lib64",
                "-Wl,--no-as-needed",
                "-fopenmp",
                "-l:libcublas.so.12",
            ],
        )
    )
    assert spec["extra_ldflags"][0] == "-lcublas"


def test_a_library_swapped_together_with_the_manifest_beside_it_is_caught(relu_problem, build_cache):
    options = EvalOptions(device="cpu", timing=False, shapes="off", sandbox="off", cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        attack = evaluator.evaluate(trust3("cache_swap_with_manifest"))
        # the library it loaded is the copy handed to it (host/scratch.hand_out), not the cache's: swapping it
        # (and writing a manifest beside it) changes nothing the host trusts; a swap of the cache itself is
        # caught by the before/after comparison
        assert attack.status in (Status.CORRECT, Status.REJECTED), attack.message
    with Evaluator(
        relu_problem, options, prespawn=False
    ) as evaluator:  # a new evaluator trusts nothing beside the library
        after = evaluator.evaluate(candidate("relu_cpp.py"))
    assert after.status is Status.CORRECT, after.message


# -- static checks that see through names ---------------------------------------------------------------


def codes(source: str) -> set[str]:
    return {w.code for w in run_static_checks(source)}


@pytest.mark.parametrize(
    "body, code",
    [
        ("import torch\nf = getattr(torch, 'matmul')\n", "torch_compute_ops"),
        ("import torch\ny = getattr(torch, 'ma' + 'tmul')(a, b)\n", "torch_compute_ops"),
        ("import torch.nn.functional as F\ny = vars(F)['gelu'](x)\n", "torch_compute_ops"),
        ("import torch.nn.functional as F\ny = F.__dict__['gelu'](x)\n", "torch_compute_ops"),
        (
            "import importlib\nF = importlib.import_module('torch.nn.' + 'functional')\ny = F.relu(x)\n",
            "torch_compute_ops",
        ),
        ("import torch\nops = [torch.relu, torch.ops.aten.mm]\n", "torch_compute_ops"),
        ("y = x.__matmul__(w)\n", "torch_compute_ops"),
        ("import operator\ny = operator.matmul(x, w)\n", "torch_compute_ops"),
        ("import torch\ny = x.__getattribute__('relu')()\n", "torch_compute_ops"),
        (
            "import sys\nimport torch.nn as nn\nclass Base(nn.Module):\n    pass\nBase = sys.modules['kevin_reference'].Model\n"
            "class ModelNew(Base):\n    pass\n",
            "subclass_reference",
        ),
        ("class Base(Model):\n    pass\nclass ModelNew(Base):\n    pass\n", "subclass_reference"),
        ("import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\nModelNew = Model\n", "subclass_reference"),
        (
            "import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\nModelNew.__bases__ = (Model,)\n",
            "subclass_reference",
        ),
        ("class Q:\n    def __exit__(self, *a):\n        return True\n", "try_except_fallback"),
        ("class Q:\n    __exit__ = lambda self, *a: True\n", "try_except_fallback"),
        ("Q = type('Q', (), {'__enter__': lambda s: s, '__exit__': lambda s, *a: 1})\n", "try_except_fallback"),
        ("import contextlib\nwith contextlib.ExitStack() as s:\n    s.push(lambda *a: True)\n", "try_except_fallback"),
    ],
)
def test_static_checks_see_through_names(body, code):
    source = body + ("" if "class ModelNew" in body else "class ModelNew:\n    pass\n")
    assert code in codes(source), body


def test_honest_code_stays_unflagged():
    honest = (
        "import torch.nn as nn\nclass Base(nn.Module):\n    pass\nclass ModelNew(Base):\n    pass\n"
        "class T:\n    def __exit__(self, *a):\n        return None\n"
    )
    assert codes(honest) == {"no_custom_kernel"}
    assert codes(trust3("honest_local_base_and_exit")) == set()


@pytest.mark.parametrize("name", ["static_constant_getattr", "static_rebound_base", "static_swallowing_exit",
                                  "dead_load_inline"])  # fmt: skip
def test_names_that_hid_torch_or_the_reference_are_rejected_under_strict(strict, name):
    verdict = strict.evaluate(trust3(name))
    assert verdict.status is Status.REJECTED and "--strict" in verdict.message, f"{name}: {verdict.message}"


def test_honest_names_stay_correct_under_strict(strict):
    verdict = strict.evaluate(trust3("honest_local_base_and_exit"))
    assert verdict.status is Status.CORRECT, verdict.message


# -- determinism, precision and state that changes between calls ----------------------------------------


def test_two_runs_on_identical_inputs_must_agree(checking):
    verdict = checking.evaluate(trust3("nondeterministic_within_tolerance"))
    assert verdict.status is Status.INCORRECT and "disagree" in verdict.message, verdict.message


def test_lower_precision_is_a_warning_and_a_rejection_under_strict(checking, strict):
    verdict = checking.evaluate(trust3("lower_precision"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert "lower_precision" in {w.code for w in verdict.warnings}
    assert verdict.evidence["precision"]["candidate"] > 0.1 and verdict.evidence["precision"]["reference"] == 0
    rejected = strict.evaluate(trust3("lower_precision"))
    assert rejected.status is Status.REJECTED and "lower_precision" in rejected.message


def test_an_honest_kernel_agrees_with_itself_at_full_precision(checking):
    verdict = checking.evaluate(candidate("relu_cpp.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert verdict.evidence["precision"] == {"candidate": 0.0, "reference": 0.0}
    assert not {w.code for w in verdict.warnings} & {"lower_precision"}


@pytest.fixture(scope="module")
def gemm(build_cache):
    options = EvalOptions(device="cpu", timing=False, shapes="off", cache_dir=build_cache)
    with Evaluator(load_problem(GEMM), options, prespawn=False) as evaluator:
        yield evaluator


def test_a_weight_cache_keyed_on_data_ptr_is_stale_after_an_in_place_change(gemm):
    verdict = gemm.evaluate(trust3("stale_weight_cache"))
    assert verdict.status is Status.INCORRECT, verdict.message
    assert "stale result after its inputs/parameters changed in place" in verdict.message


@pytest.mark.parametrize("name", ["honest_versioned_weight_cache", "gemm_pretransposed"])
def test_kernels_that_follow_or_own_their_weights_stay_correct(gemm, name):
    source = trust3(name) if name.startswith("honest_") else (CANDIDATES / "honest" / f"{name}.py").read_text()
    verdict = gemm.evaluate(source)
    assert verdict.status is Status.CORRECT, f"{name}: {verdict.message}"
