"""Trust3 attack (builds): rewrite a cached library *and* the manifest beside it. Run without a
sandbox (or through any escape that makes the cache writable), it builds a wrong ReLU under the same
extension name, copies it over the honest relu_ext entry and writes that entry's manifest with the new
hash: `BuildBroker.verify` trusted the manifest beside the library, and `tampered()` only looked at
what this evaluation had handed out.

Before (sandbox off, timing off): this one `correct`; the honest relu_cpp.py judged next loads the
wrong library: `incorrect`. Correct: this one `rejected` (a cached library changed while it ran), and
the next one rebuilt and `correct`.
"""
import hashlib
import json
import shutil
from pathlib import Path

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
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
relu_ext = load_inline(name="relu_ext", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O2"])
# Built but not imported as a module (Python would hand back the first relu_ext): load_inline returns its path.
_wrong = load_inline(name="relu_ext", cpp_sources=cpp_source.replace("in[i] : 0.f", "in[i] : 1.f"),
                     functions=["relu_forward"], extra_cflags=["-O2"], is_python_module=False)  # fmt: skip
_victim = Path(relu_ext.__file__)
try:
    _victim.unlink()
    shutil.copyfile(_wrong, _victim)
    _digest = hashlib.sha256(_victim.read_bytes()).hexdigest()
    manifest = _victim.parent / ".kevin-manifest.json"
    manifest.write_text(json.dumps({"name": "relu_ext", "sha256": _digest, "size": _victim.stat().st_size}))
except OSError:
    pass  # a read-only cache: the attack fails here


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
