r"""A correct C++ ReLU for level1/19 whose runtime-made source holds a string literal of 50,000 `/* ` (150 KB).

Attack: every scan of the candidate's C++ text starts with `static_checks.strip_c_comments`, the regex
`//[^\n]*|/\*.*?\*/` (re.S): from each `/*` with no `*/` after it the lazy `.*?` runs to the end of the text, so the
cost is quadratic in the number of unclosed `/*` (redteam14 made `CPP_CALL` linear; the comment stripper before it
was not measured). `/*` inside a C++ string literal is ordinary code and compiles. The built text is scanned by the
host after `host_work("build")` ends (`candidate_run.build` -> `cpp_torch_compute`), so that time is charged to the
candidate's load deadline; in the module's own string constants the same scan runs in `run_static_checks`, before
any deadline (1 MB: about an hour of the host's time; 60 KB took 14 s, 150 KB ~90 s on the loaded 2-core machine).
True verdict: correct. Verdict got (2026-12-02, 2 loaded cores): `timeout` "no result within 30 s in the load
phase; process group killed" after a 196 s build (4m37s in all, 42 s of it the host's CPU); with the fix, `correct` in
15 s (the build cached).
Command:
  python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam15/unclosed_comment_scan_times_out_honest.py \
      --device cpu --json --no-git --no-profile --shapes off --sandbox unshare --no-timing --timeout 30
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = (
    """
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
static const char* kBanner = \""""
    + "/* " * 50_000
    + """\";
"""
)

relu_ext = load_inline(
    name="relu_ext_banner",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O2"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
