"""Attack (redteam19): hold the evaluator far past `--build-timeout` by asking for many builds. The limit "for
importing and building it" was given afresh to every `load_inline` (candidate_run.build: a new deadline of
`build_timeout_s` per request), and the host's time in each build moved the import deadline back by as much, so
a candidate making N distinct extensions held its evaluation (and in batch, the whole run) for up to N x 900 s
of compiling while using none of its own time. This one builds BUILDS extensions of an honest C++ ReLU, each
made new by a random word (no build cache can answer it), and uses the last. Before the fix, with
`--build-timeout 100` (`--sandbox unshare`, ReLU, `--no-timing`, a loaded 2-core machine): `correct` after 4
builds of 73-92 s each, 324 s of building under a 100 s limit (348 s in all); after, the same
command: the builds share one limit, `timeout` in the second build ("no result within 100 s in the build phase
(its 2 builds share that limit)")."""

import os

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BUILDS = 4

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

for index in range(BUILDS):
    word = os.urandom(8).hex()
    relu_ext = load_inline(
        name=f"rt19_many_{index}_{word}",
        cpp_sources=cpp_source + f"\n// {word}\n",
        functions=["relu_forward"],
        extra_cflags=["-O2"],
    )


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
