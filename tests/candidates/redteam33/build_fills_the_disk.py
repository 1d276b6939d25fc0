"""Red team 33: a build that writes far more than a build may leave, object by object, into the host's build cache.

`load(sources=...)` with many C++ files, each of whose objects carries a data section of 300 MB (`.fill`): every
file is under the builder's file-size limit (512 MB), and the build directory, which lies in the build cache on the
host's disk, was measured only once the build was over. This one stops at 4 files (1.2 GB); with 200 the builder
filled a 64 GB disk before anything looked, and the host's own writes (the reference's, other builds') failed with it.
Got before the fix: the whole 1.2 GB written, then `compile_error` from the link (its library over the file-size
limit). Due: the builder stopped once its directory holds more than a build may leave.
"""

import tempfile
from pathlib import Path

import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""
#include <torch/extension.h>
asm(".section .data\n.fill 300000000,1,7\n.previous");
torch::Tensor part_%d(torch::Tensor x) { return x; }
"""
MAIN = r"""
#include <torch/extension.h>
torch::Tensor part_0(torch::Tensor x);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("part_0", &part_0); }
"""
folder = Path(tempfile.mkdtemp())
paths = []
for i in range(4):
    (folder / f"part{i}.cpp").write_text(SOURCE % i)
    paths.append(str(folder / f"part{i}.cpp"))
(folder / "module.cpp").write_text(MAIN)
ext = load(name="redteam33_fills_the_disk", sources=[*paths, str(folder / "module.cpp")], extra_cflags=["-O0"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.part_0(x)
