r"""A correct C++ ReLU for level1/19 judged `timeout` for the host's own work: the shown instance of
quadratic_scan_stalls_host.py, with 20,000 repeats of `at::` (80 KB) in an `#if 0` block of its runtime-made source.

Attack: the host's scan of the built text (`candidate_run.build` -> `cpp_torch_compute`, regex `CPP_CALL`,
quadratic on `at::at::...`) runs after `host_work("build")` has ended, so its time is charged to the
candidate's load phase and its deadline.
True verdict: correct. Verdict got (2026-12-02, 2 loaded cores): `timeout` "no result within 20 s in the load
phase; process group killed", phases_s {'load': 83.3, 'build': 53.7} (the build's own 54 s moved the deadline;
the scanning, most of the 83 s load phase, did not). With the default --timeout the same needs more repeats (the time is quadratic).
Command:
  python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam14/quadratic_scan_times_out_honest.py \
      --device cpu --json --no-git --no-profile --shapes off --sandbox unshare --no-timing --timeout 20
"""
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

REPEATS = 20_000  # 80 KB of text
padding = "#if 0\n" + "at::" * REPEATS + "\n#endif\n"

relu_ext = load_inline(
    name="relu_ext_scan",
    cpp_sources=padding + cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O2"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
