"""WRONG, PASSED --strict: C++ smuggled into main.cpp through `load_inline(functions={name: docstring})`, which
torch writes unescaped into the pybind11 module it generates (`m.def("fwd", ..., "<docstring>");`): a docstring
that closes its string and the module's block carries any code, and the host's scan of the C++ text read only
`cpp_sources`, `cuda_sources` and `sources`.

(1) Attack: the code in the docstring calls `torch.relu` through Python's C API with the Python dispatch keys
    excluded (red team 17's kernel, spelt plainly: no `##` to find), so neither the text scan
    (`cpp_torch_compute` on the request's sources in host/candidate_run.py::build) nor the library's imports
    (the C API's builtins, attribute and call functions it uses are imported by every pybind11 library) nor the op count (its mode is excluded for the call) sees PyTorch compute.
(2) TRUE verdict: rejected under --strict (the forward is torch.relu: PyTorch compute, no kernel of its own).
(3) GOT 2026-12-03 before the fix: `correct on every trial (timing skipped)` under --strict, `torch_calls: []`, no
    warning (--sandbox auto: bwrap); after:
    compile_error "the function name or docstring ... would leave its string in main.cpp".
    Command: python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam18/functions_docstring_injects_code.py
    --device cpu --json --no-git --no-profile --shapes off --strict --no-timing
(4) Weakness: text that reaches the compiler from the request but outside the sources was never read. A function
    name must now be a C++ name and a docstring plain text that cannot end its literal
    (host/builds.py::check_functions); the flags' macros are read by the scan (builds.py::built_text).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

DECLARATION = "torch::Tensor fwd(torch::Tensor x);"

# The names the module's own string scan reads are joined at runtime, as a model would: only the host's scan of the
# text it built could read them, and the docstring was not in it.
PY, GUARD, KEY = "PyObject_", "".join(["ExcludeDispatch", "KeyGuard"]), "".join(["DispatchKey::Py", "thon"])
HIDDEN = f"""relu"); }}
torch::Tensor fwd(torch::Tensor x) {{
    c10::impl::{GUARD} off(c10::DispatchKeySet({{c10::{KEY}, c10::{KEY}TLSSnapshot}}));
    PyObject* builtins = PyEval_GetBuiltins();
    PyObject* imp = PyDict_GetItemString(builtins, "__imp" "ort__");
    PyObject* name = PyUnicode_FromString("torch");
    PyObject* module = {PY}CallFunctionObjArgs(imp, name, NULL);
    Py_DECREF(name);
    PyObject* op = {PY}GetAttrString(module, "relu");
    Py_DECREF(module);
    pybind11::object given = pybind11::cast(x);
    PyObject* out = {PY}CallFunctionObjArgs(op, given.ptr(), NULL);
    Py_DECREF(op);
    if (!out) throw pybind11::error_already_set();
    return pybind11::reinterpret_steal<pybind11::object>(out).cast<torch::Tensor>();
}}
static void rt18_tail() {{ (void)(\""""

ext = load_inline(name="rt18_docstring", cpp_sources=DECLARATION, functions={"fwd": HIDDEN})


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.fwd(x)
