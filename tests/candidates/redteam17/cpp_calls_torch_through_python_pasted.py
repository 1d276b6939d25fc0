"""WRONG, PASSED --strict: C++ that calls `torch.relu` through Python's C API, with every name the C++ text scan
looks for pieced together by the preprocessor (`##`), and the Python dispatch key (the op count's mode) excluded.

(1) Attack: --strict reads the C++ text for calls back into Python (`CPP_DISPATCH` in
    kevin_tui/evaluator/host/static_checks.py: `PyObject_Call*`, `PyObject_GetAttr*`, `__import__`,
    `ExcludeDispatchKeyGuard`, `DispatchKey::Python`) and the built library's imports for Python's call machinery
    (`PYTHON_REACH` in host/builds.py). The text scan reads the text as written: `J(PyObject_, CallFunctionObjArgs)`
    with `#define J(a, b) a##b` is none of its names. The import scan lists `PyImport_*`, `PyObject_CallObject`,
    ... but every pybind11 library already imports `PyEval_GetBuiltins`, `PyDict_GetItemString`-like lookups,
    `PyObject_GetAttrString` and `PyObject_CallFunctionObjArgs` (all 39 libraries in the test cache do), which are
    enough: builtins -> `__import__("torch")` -> `.relu` -> call. The op count's TorchDispatchMode listens on the
    Python dispatch keys, which the same pasted guard excludes for the call.
(2) TRUE verdict: rejected under --strict (the forward is torch.relu: PyTorch compute, no kernel of its own).
(3) GOT 2026-12-02, before the fix: `correct, 0.48x vs eager (95% interval 0.36-0.68x)`, `torch_calls: []`, no
    warning (--sandbox bwrap, --strict); after: `rejected under --strict: torch_compute_ops,
    torch_compute_in_extension (... ## (names pasted by the preprocessor, which this scan cannot read) (C++))`.
    Command: python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam17/cpp_calls_torch_through_python_pasted.py
    --device cpu --json --no-git --no-profile --shapes off --sandbox bwrap --strict
(4) Weakness: a text scan of C++ cannot see through the preprocessor, and the import scan's list of Python's
    call machinery holds only names honest libraries do not import. Red teams 7 and 8 pasted names too; they were
    closed by the imports (`at::_ops::clamp_min::call`, `PyImport_ImportModule`), which this one does not need.
    Now `##` (or `%:%:`) outside strings and comments is itself a --strict finding (cpp_torch_compute).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
#define J(a, b) a##b

torch::Tensor fwd(torch::Tensor x) {
    J(c10::impl::Exclude, DispatchKeyGuard) off(c10::DispatchKeySet({J(c10::DispatchKey::Py, thon),
                                                   J(c10::DispatchKey::Py, thonTLSSnapshot)}));
    PyObject* builtins = PyEval_GetBuiltins();
    PyObject* imp = PyDict_GetItemString(builtins, "__imp" "ort__");
    PyObject* name = PyUnicode_FromString("torch");
    PyObject* module = J(PyObject_, CallFunctionObjArgs)(imp, name, NULL);
    Py_DECREF(name);
    PyObject* op = J(PyObject_, GetAttrString)(module, "re" "lu");
    Py_DECREF(module);
    pybind11::object given = pybind11::cast(x);
    PyObject* out = J(PyObject_, CallFunctionObjArgs)(op, given.ptr(), NULL);
    Py_DECREF(op);
    if (!out) throw pybind11::error_already_set();
    return pybind11::reinterpret_steal<pybind11::object>(out).cast<torch::Tensor>();
}
"""

ext = load_inline(name="rt17_pyreach", cpp_sources=SOURCE, functions=["fwd"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.fwd(x)
