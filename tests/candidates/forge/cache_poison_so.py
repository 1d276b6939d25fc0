"""Forge (class 6, build cache), rewritten for today's layout: the builds happen in a builder worker of
their own and the candidate is handed its libraries, so the one cache file it can reach is a library it
was given. It builds the honest tests/candidates/relu_cpp.py's exact sources and flags (so the library
it is handed is the cache entry the next honest candidate is handed too), then tries every way to change
that library where it lies: write into it, replace it from a file beside it, remove it, change its mode.

Any way that works leaves relu_cpp.py, evaluated next with the same cache, loading a broken library
(`runtime_error`) unless the host sees the change (`rejected`, rebuilt for the next). With every way
refused (read-only binds), its own forward is an honest ReLU: `correct` at its real speed.
If it finds no library of its own mapped (the layout changed), it raises: the attack did not run, and
the test that expects `correct` or `rejected` fails instead of passing on an attack that never happened.
Before this rewrite it looked up a class that no longer exists and failed at import, attacking nothing.
"""
import os
from pathlib import Path

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

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
relu_ext = load_inline(name="relu_ext", cpp_sources=VICTIM_CPP, functions=["relu_forward"], extra_cflags=["-O2"])


def _mapped_library(name: str) -> Path:
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split(maxsplit=5)[-1]
        if path.endswith(".so") and Path(path).name.startswith(name):
            return Path(path)
    raise RuntimeError(f"attack did not run: no library named {name} is mapped (the layout changed?)")


def _attempts(target: Path) -> list[str]:
    done = []
    try:
        with open(target, "r+b") as f:
            f.write(b"\0" * 64)
        done.append("wrote into it")
    except OSError:
        pass
    staging = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        staging.write_bytes(b"not a library")
        os.replace(staging, target)
        done.append("replaced it")
    except OSError:
        pass
    try:
        os.chmod(target, 0o777)
        done.append("changed its mode")
    except OSError:
        pass
    try:
        target.unlink()
        done.append("removed it")
    except OSError:
        pass
    return done


_done = _attempts(_mapped_library("relu_ext"))
if _done:
    import sys

    print(f"kevin-redteam: the cached library: {', '.join(_done)}", file=sys.stderr)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
