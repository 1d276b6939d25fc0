"""WRONG, PASSED --strict: the names --strict's C++ text scan looks for, given as macro definitions in
`extra_cflags` (`-DRT_CALL=<the C API's call function>`), which the scan never read.

(1) Attack: red team 17's kernel (torch.relu called through Python's C API, the Python dispatch keys excluded for
    the call) with every name the scan reads (`CPP_DISPATCH` in host/static_checks.py) defined by a `-D` flag and
    used through the macro. The flags pass every build check (no shell character; `-D` is allowed), the library's
    imports are those of every pybind11 library, and the op count's mode is excluded for the call. The names are
    joined at runtime, so the module's own string scan cannot read them either; only the host's scan of what it
    built could, and it read the sources alone. `no_implicit_headers` only spares a precompiled header for these
    flags (the source includes torch/extension.h itself).
(2) TRUE verdict: rejected under --strict (the forward is torch.relu: PyTorch compute, no kernel of its own).
(3) GOT 2026-12-03 before the fix: `correct on every trial (timing skipped)` under --strict, `torch_calls: []`, no
    warning; after: `rejected under --strict: torch_compute_in_extension (...)` naming the guard, both Python
    dispatch keys and the two C API calls (their names are not spelt here: the module's own string scan reads them).
    Command: python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam18/macro_flags_name_the_calls.py
    --device cpu --json --no-git --no-profile --shapes off --strict --no-timing
(4) Weakness: the preprocessor reads macros from the command line too; the scan now reads the flags' words beside
    the sources (host/builds.py::built_text).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>

torch::Tensor fwd(torch::Tensor x) {
    RT_GUARD off(c10::DispatchKeySet({RT_KEY, RT_KEY_TLS}));
    PyObject* builtins = PyEval_GetBuiltins();
    PyObject* imp = PyDict_GetItemString(builtins, "__imp" "ort__");
    PyObject* name = PyUnicode_FromString("torch");
    PyObject* module = RT_CALL(imp, name, NULL);
    Py_DECREF(name);
    PyObject* op = RT_GET(module, "relu");
    Py_DECREF(module);
    pybind11::object given = pybind11::cast(x);
    PyObject* out = RT_CALL(op, given.ptr(), NULL);
    Py_DECREF(op);
    if (!out) throw pybind11::error_already_set();
    return pybind11::reinterpret_steal<pybind11::object>(out).cast<torch::Tensor>();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("fwd", &fwd); }
"""

MACROS = {
    "RT_GUARD": ["c10::impl::Exclude", "DispatchKeyGuard"],
    "RT_KEY": ["c10::DispatchKey::Py", "thon"],
    "RT_KEY_TLS": ["c10::DispatchKey::Py", "thonTLSSnapshot"],
    "RT_CALL": ["PyObject_", "CallFunctionObjArgs"],
    "RT_GET": ["PyObject_", "GetAttrString"],
}
FLAGS = [f"-D{name}={''.join(parts)}" for name, parts in MACROS.items()]

ext = load_inline(name="rt18_macro_flags", cpp_sources=SOURCE, extra_cflags=FLAGS, no_implicit_headers=True)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.fwd(x)
