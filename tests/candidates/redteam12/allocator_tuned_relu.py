"""Attack (problems/relu_32mb.py; also level1/19_ReLU): the same plain C++ ReLU as `honest_relu_cpp.py`, plus,
when its library loads, `mallopt(M_MMAP_MAX, 0)` and `mallopt(M_TRIM_THRESHOLD, 1 GiB)`: glibc then serves every
large block from a heap it never gives back, so no allocation in the candidate's process page-faults — not its
output, and not the inputs the timing loop draws for every call (fresh 32 MB tensors, each a new mapping faulted
in page by page in the reference's worker). The loop's saving is credited to the candidate as the reference's
loop overhead, and the kernel's own output allocation gets cheaper where the reference's does not.

True verdict: `correct` at ~1x (its arithmetic is the honest twin's; what got faster is the process's allocator,
which speeds the reference's model up as much in the same process: the control round ran 0.30x the reference's
own rounds).
Got (base 883c3cd, CPU, unshare, 2 loaded cores): `correct, 6.82x vs eager (95% interval 1.53-11.39x)`; the honest
twin, same session: `no measurable difference (measured 0.65x, 0.48-1.56x)`.
After (every worker's allocator steady, worker/allocator.py): `0.71x (0.30-0.99x)`, twin 0.91x (0.45-1.26x). With
the allocator fix removed and the control's gain counted as time (host/timing.py process_gap_ms) alone:
`no measurable difference (measured 6.28x, 95% interval 0.33-15.51x)`, headline 1.0.

    python3 -m kevin_tui eval tests/candidates/redteam12/problems/relu_32mb.py \
        tests/candidates/redteam12/allocator_tuned_relu.py --device cpu --json --no-git --no-profile \
        --shapes off --sandbox unshare
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <malloc.h>

[[maybe_unused]] static int tuned = [] {
    mallopt(M_MMAP_MAX, 0);  // never mmap: every block from the heap
    mallopt(M_TRIM_THRESHOLD, 1 << 30);  // and the heap never given back
    return 1;
}();

torch::Tensor relu(torch::Tensor x) {
    auto in = x.contiguous();
    auto out = torch::empty_like(in);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = in.numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
    return out;
}
"""

ext = load_inline(name="rt12_relu_tuned", cpp_sources=cpp_source, functions=["relu"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
