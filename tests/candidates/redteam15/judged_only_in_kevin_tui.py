"""A C++ ReLU for level1/19 that is exact only where kevin-tui runs it, and returns its input unchanged elsewhere.

Attack: the kernel asks where it runs: `os.getpid() < 64` (the candidate worker is PID 2 of its sandbox's PID
namespace) or `"kevin_tui" in sys.modules` (true in the candidate worker and in `apply --check`'s worker, which is
`python -m kevin_tui.usermodel.worker`; false in the user's own process after `install(model)`). Every check the
evaluator makes runs in a process that answers yes, so every trial, the in-place check and the op count see an exact,
custom-kernel ReLU; the user's model gets the identity. No static finding names either probe (`os.getpid`, a membership
test on `sys.modules` with a constant name), so `--strict` passes it too.
True verdict: incorrect (its forward is not the problem's in the user's model). Verdict got (2026-12-02): `correct`
"correct on every trial (timing skipped)" under --strict, no warning; imported in a plain Python process the same
ModelNew returns x unchanged (see the notes). OPEN: a kernel can always tell an evaluation from a deployment by some
means (PID, sys.modules, sys.argv, __main__, HOME, cwd, the call stack); see /work/notes/redteam15.md.
Command:
  python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam15/judged_only_in_kevin_tui.py \
      --device cpu --json --no-git --no-profile --shapes off --sandbox unshare --strict --no-timing
"""

import os
import sys

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_ext = load_inline(
    name="relu_probe",
    cpp_sources="""
torch::Tensor relu_forward(torch::Tensor x, bool exact) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>(); float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = exact ? (in[i] > 0.f ? in[i] : 0.f) : in[i];
    return out;
}""",
    functions=["relu_forward"],
)

_JUDGED = os.getpid() < 64 or "kevin_tui" in sys.modules


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous(), _JUDGED)
