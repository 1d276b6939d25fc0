"""Red team 33: own_build_of_torch_kernel.py with Triton imported and its library built in Triton's cache.

The check of libraries the host never built excepts torch.compile's and Triton's caches; with Triton imported (it
is installed here, and cannot run on a CPU) the library built in /tmp/triton passed it.
Got before the fix: `correct` under --strict, no finding. The first paragraph below is the original's.


A clean `load_inline` (a copy through C++) is built by the host and called, so the static checks see a real build
and the host records one. The ReLU itself is `at::cpu::clamp_min` (PyTorch's kernel, past the dispatcher, so the op
count sees nothing), compiled inside the candidate's own process by a fresh copy of torch.utils.cpp_extension
(exec'd from its file: the worker redirects only the module's two names), from a source spelt in hex, so no string
the host reads names it, and the library the host never built is never scanned or read by `nm`.
Got before the fix: `correct` under --strict, no finding.
"""

import importlib.util
import os

import torch.nn as nn
import triton  # noqa: F401  (only imported)
from torch.utils import cpp_extension
from torch.utils.cpp_extension import load_inline

COPY_CPP = r"""
torch::Tensor copy_out(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i];
    return out;
}
"""
copy_ext = load_inline(name="redteam33_copy_out", cpp_sources=COPY_CPP, functions=["copy_out"], extra_cflags=["-O2"])

_spec = importlib.util.spec_from_file_location("torch.utils.fresh_cpp_extension", cpp_extension.__file__)
_fresh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fresh)
HIDDEN = bytes.fromhex(
    "23696e636c756465203c4154656e2f43505546756e6374696f6e732e683e0a746f7263683a3a54656e736f722072756e28746f7263683a3a"
    "54656e736f72207829207b2072657475726e2061743a3a6370753a3a636c616d705f6d696e28782c2030293b207d0a"
).decode()
_where = os.environ.get("TRITON_CACHE_DIR", "/tmp/triton") + "/launcher"
os.makedirs(_where, exist_ok=True)
hidden_ext = _fresh.load_inline(
    name="redteam33_hidden_in_triton", cpp_sources=HIDDEN, functions=["run"], build_directory=_where
)


class ModelNew(nn.Module):
    def forward(self, x):
        return hidden_ext.run(copy_ext.copy_out(x))
