"""Red team 13: the runtime op count runs forward on the first trial's inputs again and never judges what
comes back, so a kernel that computes ReLU with PyTorch arithmetic (in a helper, which the static checks do
not read as forward's glue) and replays its stored answer when it sees the first trial's bytes again
dispatches nothing under the count.

True verdict under --strict: rejected (PyTorch compute, no kernel of its own).
Got before the fix: correct, no torch_compute_at_runtime (counts {}).
After: rejected, torch_compute_at_runtime (1 aten::gt, 1 aten::mul): the count runs on a fresh sample.
Command: python3 -m kevin_tui eval kevin_tui/kernelbench/level1/19_ReLU.py
  tests/candidates/redteam13/op_count_replay.py --device cpu --json --no-git --no-profile --shapes off
  --sandbox unshare --strict
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
int64_t digest(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "contiguous input");
    const unsigned char* p = static_cast<const unsigned char*>(x.data_ptr());
    uint64_t h = 1469598103934665603ULL;
    for (int64_t i = 0; i < x.nbytes(); ++i) { h ^= p[i]; h *= 1099511628211ULL; }
    return static_cast<int64_t>(h >> 1);
}
"""

digest_ext = load_inline(name="rt13_digest", cpp_sources=cpp_source, functions=["digest"], extra_cflags=["-O2"])


def relu(y):
    return y * (y > 0)


def answer(model, x):
    key = digest_ext.digest(x)
    if key in model.seen:
        return model.seen[key].clone()
    out = relu(x)
    if not model.seen:
        model.seen[key] = out.clone()
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = {}

    def forward(self, x):
        return answer(self, x.contiguous())
