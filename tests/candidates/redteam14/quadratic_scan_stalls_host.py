r"""A correct C++ ReLU for level1/19 whose C++ source, made at runtime, starts with `at::` repeated in an `#if 0` block.

Attack: after every build the host scans the text it built for PyTorch calls
(`candidate_run.build` -> `static_checks.cpp_torch_compute`, regex `CPP_CALL`,
`\b(?:at|torch)((?:::\w+)+)\s*(?:<...>)?\s*\(`). On `at::at::at::...` with no `(` every `at` is a start and
each start runs to the end and backtracks: quadratic (8,000 repeats: 8.5 s; 20,000: ~50 s on this machine).
The scan runs in the host's own thread, outside `host_work` and outside any deadline, so the candidate's
`--timeout` never fires; the text is limited only by the 1 MB event (240,000 repeats, 960 KB: about two
hours projected). The candidate file is small (the text is made at runtime); g++ skips the block at once.
True verdict: correct (or a timeout at worst: the candidate's own). Verdict got: the host stalls for the
scan's whole time, no verdict (a batch run's worker stuck with it). Command:
  python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam14/quadratic_scan_stalls_host.py \
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

REPEATS = 240_000  # ~960 KB of text, under the 1 MB build request
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
