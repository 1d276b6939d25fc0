"""Red team 18: the build path, its flags and what reaches the compiler, and `apply --check` (tests/candidates/redteam18/)."""

from __future__ import annotations

import importlib.util
import math
from typing import Any

import pytest
import torch
from torch.utils import cpp_extension

from kevin_tui.evaluator.host.builds import FlagRefused, normalise, scanned_text
from kevin_tui.evaluator.host.static_checks import cpp_torch_compute
from kevin_tui.evaluator.worker.build_client import BuildClient
from tests.conftest import CANDIDATES, candidate

HERE = CANDIDATES / "redteam18"


class _Recorder:
    """The candidate worker's channel, stood in for: keeps the build request and answers that nothing was built."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def emit(self, event: str, **fields: Any) -> None:
        self.requests.append({"event": event, **fields})

    def expect(self, *names: str) -> dict[str, Any]:
        return {"ok": False, "message": "not built in this test"}


def request_of(name: str, monkeypatch) -> dict[str, Any]:
    """The build request the candidate's import sends the host, exactly as the worker's build client makes it."""
    monkeypatch.setattr(cpp_extension, "load_inline", cpp_extension.load_inline)  # restored after the test
    monkeypatch.setattr(cpp_extension, "load", cpp_extension.load)
    channel = _Recorder()
    BuildClient(channel).install()  # type: ignore[arg-type]
    spec = importlib.util.spec_from_file_location(f"redteam18_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(RuntimeError, match="not built in this test"):
        spec.loader.exec_module(module)
    (request,) = channel.requests
    return request


def test_a_docstring_that_ends_its_string_in_main_cpp_is_refused(monkeypatch):
    """functions_docstring_injects_code.py: torch writes `m.def("fwd", ..., "<docstring>");` unescaped, so the
    docstring's `"); }` let C++ the scan never read (torch.relu through Python's C API) into main.cpp: `correct`
    under --strict."""
    request = request_of("functions_docstring_injects_code", monkeypatch)
    assert cpp_torch_compute(scanned_text(request)) == []  # the hidden code is in no source the scan reads
    with pytest.raises(FlagRefused, match="docstring of 'fwd'"):
        normalise(request)


@pytest.mark.parametrize("name", ["fwd), 0); } at::Tensor g(at::Tensor x) { return x; } //", "ns::fwd", "", "a b"])
def test_a_function_name_that_is_not_an_identifier_is_refused(name):
    request = _honest_request(functions=[name])
    with pytest.raises(FlagRefused, match="function name"):
        normalise(request)


def test_honest_function_names_and_docstrings_still_build():
    honest = {"relu_forward": "ReLU: max(x, 0) elementwise, for float32 tensors (any shape); see 'README' & notes.",
              "relu_backward": "", "_helper2": "ünïcode is fine: ∂y/∂x = 1 where x > 0"}  # fmt: skip
    for functions in (honest, list(honest), None):
        assert normalise(_honest_request(functions=functions))["functions"] == functions


def test_macros_in_the_flags_are_read_with_the_sources(monkeypatch):
    """macro_flags_name_the_calls.py: every name the C++ scan looks for given as `-DNAME=<name>` in extra_cflags and
    used through the macro: `correct` under --strict, since the scan read the sources alone."""
    request = request_of("macro_flags_name_the_calls", monkeypatch)
    sources = "\n".join(request["cpp_sources"])
    assert cpp_torch_compute(sources) == []  # what the scan read before
    found = cpp_torch_compute(scanned_text(request))
    for name in ("ExcludeDispatchKeyGuard", "DispatchKey::Python", "PyObject_CallFunctionObjArgs", "PyObject_GetAttr"):
        assert any(name in f for f in found), (name, found)
    normalise(request)  # the flags themselves are allowed: -D is honest


def test_macros_given_to_nvcc_or_the_preprocessor_are_read_too():
    for flags in (["-Xcompiler", "-DCALL=PyObject_CallFunctionObjArgs"], ["--define-macro", "G=c10::impl::ExcludeDispatchKeyGuard"],
                  ["-Xcompiler=-DCALL=PyObject_CallFunctionObjArgs"], ["-Wp,-DCALL=PyObject_CallFunctionObjArgs"]):  # fmt: skip
        assert cpp_torch_compute(scanned_text(_honest_request(extra_cuda_cflags=flags))), flags


def test_honest_flags_are_no_finding():
    request = _honest_request(
        extra_cflags=["-O3", "-fopenmp", "-march=native", "-DUSE_FAST_PATH=1", "-DTILE=64", "-std=c++17", "-Wall"],
        extra_cuda_cflags=["-O3", "--use_fast_math", "-gencode", "arch=compute_90,code=sm_90", "-Xcompiler", "-fPIC",
                           "-DBLOCK=256", "--expt-relaxed-constexpr", "-lineinfo"],
    )  # fmt: skip
    assert cpp_torch_compute(scanned_text(normalise(request))) == []


def test_the_docstring_candidate_is_the_candidates_compile_error_without_a_build(strict):
    verdict = strict.evaluate(candidate("redteam18/functions_docstring_injects_code.py"))
    assert verdict.status == "compile_error", verdict.message
    assert "docstring" in verdict.message
    assert [b["cached"] for b in verdict.details["builds"]] == [False] and not verdict.details["builds"][0]["ok"]


def _honest_request(**changes: Any) -> dict[str, Any]:
    request = {
        "event": "build_request", "kind": "inline", "name": "honest_relu", "sources": [], "functions": ["relu_forward"],
        "cpp_sources": ["torch::Tensor relu_forward(torch::Tensor x);"], "cuda_sources": [], "extra_cflags": [],
        "extra_cuda_cflags": [], "extra_ldflags": [], "extra_include_paths": [], "with_cuda": None,
        "no_implicit_headers": False,
    }  # fmt: skip
    return {**request, **changes}


def _float_total_model(dtype: torch.dtype = torch.float32):
    from kevin_tui.usermodel.check import import_helper

    module = import_helper(HERE / "honest_float_total_apply.py")
    torch.manual_seed(0)
    return module.Net().to(dtype), [torch.randint(0, 4096, (512,))]


def test_an_honest_float_output_summed_in_another_order_passes_apply_check():
    """honest_float_total_apply.py: `.item()` of a float32 sum against the kernel's float64-accumulated total
    (-474.63214 against -474.63206): "outputs differ" before, a Python float was compared with `==`."""
    from kevin_tui.usermodel.check import check

    model, args = _float_total_model()
    fresh = [("new values", [torch.randint(0, 4096, (512,))]), ("batch size 1024", [torch.randint(0, 4096, (1024,))])]
    result = check(
        model, args, HERE / "honest_float_total_apply.py", "cpu", {"rounds": 2}, fresh, draw=lambda: list(args)
    )
    assert result["passed"], result["message"]
    assert 0 < result["max_abs_diff"] < 1e-3 and result["modes"] == ["train", "eval"]
    assert "fresh_skipped" not in result


def test_a_float_output_is_judged_in_the_dtype_the_model_computed_it_in():
    from kevin_tui.usermodel.check import compare, model_output

    model, args = _float_total_model()
    total = model_output(model, args)
    assert compare(total, total * (1 + 2e-5), None, None)[0] is None  # float32's tolerance
    assert compare(total, total * (1 + 1e-3), None, None)[0] is not None  # a wrong total still fails
    model64, args = _float_total_model(torch.float64)
    total64 = model_output(model64, args)
    assert compare(total64, total64 * (1 + 2e-5), None, None)[0] is not None  # float64's: 1e-7
    assert compare(float(total64), float(total64) * (1 + 2e-5), None, None)[0] is None  # untyped: the default's


@pytest.mark.parametrize(
    ("expected", "got", "same"),
    [(math.nan, math.nan, True), (math.inf, math.inf, True), (math.inf, 1e300, False), (math.nan, 1.0, False),
     (1.0, math.nan, False), (math.inf, -math.inf, False)],
)  # fmt: skip
def test_a_float_that_is_nan_or_infinite_is_matched_only_by_the_same(expected, got, same):
    from kevin_tui.usermodel.check import compare

    why, difference = compare(expected, got, None, None)
    assert (why is None) == same and difference == (0.0 if same else math.inf)


@pytest.mark.parametrize(
    "flags",
    [["--options-file", "cuda.cu"], ["-optf=cuda.cu"], ["-Xptxas=-optf,opts.txt"], ["-Xptxas", "--options-file=o"],
     ["-arbin", "/bin/sh"], ["--run"], ["-time", "t.csv"], ["--fdevice-time-trace=t.json"], ["-Xfatbin", "--create=main.o"],
     ["-Xfatbin=-create,main.o"], ["--output=main.o"], ["-fdiagnostics-add-output=sarif:file=x"]],
)  # fmt: skip
def test_options_read_from_a_file_or_that_run_or_write_are_refused(flags):
    """nvcc_options_file_runs_a_program.py: `--options-file cuda.cu` read `-Xcompiler=-wrapper,/usr/bin/echo` from
    the candidate's own CUDA source, and the builder ran echo (its output, cc1plus's command line, in the log)."""
    with pytest.raises(FlagRefused, match="not allowed"):
        normalise(_honest_request(extra_cuda_cflags=flags))


def test_the_options_file_candidate_is_refused_before_anything_is_built(strict):
    verdict = strict.evaluate(candidate("redteam18/nvcc_options_file_runs_a_program.py"))
    assert verdict.status == "compile_error", verdict.message
    assert "--options-file" in verdict.message and "cc1plus" not in str(verdict.details)


def _batch_specialised():
    from kevin_tui.usermodel.check import import_helper

    module = import_helper(HERE / "batch_specialised_apply.py")
    torch.manual_seed(0)
    fresh = [("new values", [torch.randint(0, 1000, (512,))]), ("batch size 1024", [torch.randint(0, 1000, (1024,))])]
    return module, module.Net(), [torch.randint(0, 1000, (512,))], fresh


def test_a_kernel_right_only_at_the_checks_batch_size_fails_apply_check():
    """batch_specialised_apply.py: zeros past the check's 512 rows, in a model no gradient flows through, passed
    (`outputs match`): the forward was compared on the check's inputs only."""
    from kevin_tui.usermodel.check import check

    _, model, args, fresh = _batch_specialised()
    result = check(
        model, args, HERE / "batch_specialised_apply.py", "cpu", {"rounds": 2}, fresh, draw=lambda: list(args)
    )
    assert not result["passed"] and "(on batch size 1024)" in result["message"], result["message"]
    assert check(
        model, args, HERE / "batch_specialised_apply.py", "cpu", {"rounds": 2}, fresh[:1], draw=lambda: list(args)
    )["passed"]


def test_a_kernel_that_refuses_another_batch_size_is_listed_not_failed(monkeypatch):
    from kevin_tui.usermodel.check import check

    module, model, args, fresh = _batch_specialised()

    def loud(self, ids):  # a kernel with a TORCH_CHECK on its one shape: loud at any other, never silently wrong
        if ids.shape[0] != module.BATCH:
            raise RuntimeError(f"this kernel takes {module.BATCH} rows")
        return torch.tanh(self.table[ids])

    monkeypatch.setattr(module.ModelNew, "forward", loud)
    monkeypatch.setattr("kevin_tui.usermodel.check.import_helper", lambda path: module)
    result = check(
        model, args, HERE / "batch_specialised_apply.py", "cpu", {"rounds": 2}, fresh, draw=lambda: list(args)
    )
    assert result["passed"], result["message"]
    (skipped,) = result["fresh_skipped"]
    assert skipped.startswith("batch size 1024: the kernel does not take it") and "takes 512 rows" in skipped
