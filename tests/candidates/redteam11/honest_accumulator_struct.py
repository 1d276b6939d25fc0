"""HONEST, WRONGLY REJECTED under --strict: level1/47 (sum over dim 1 of 16x256x256) with a C++ kernel that
keeps a compensated (Kahan) sum in a helper struct of its own, whose methods are named `add` and `sum`.

The C++ text scan read every `.add(` and `.sum(` as a tensor method (PyTorch compute, a rejection under --strict)
whatever it was called on. `acc` is declared only as `KahanSum`, a struct this text defines without a base and
never renames, so `acc.add(v)` is the kernel's own arithmetic. True verdict: correct. Got (2026-12-02, found by
calling the static checks in red team 11): `rejected` under --strict, "PyTorch compute in the extension:
.add(), .sum()".
Command:
  python3 -m kevin_tui eval kernelbench:level1/47 tests/candidates/redteam11/honest_accumulator_struct.py \
      --device cpu --json --no-git --no-profile --shapes off --strict
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SUM_CPP = r"""
struct KahanSum {
    float total = 0.f, carry = 0.f;
    void add(float v) {
        const float y = v - carry;
        const float t = total + y;
        carry = (t - total) - y;
        total = t;
    }
    float sum() const { return total; }
};

torch::Tensor sum_dim1(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 3 && x.scalar_type() == torch::kFloat, "expects a 3-d float tensor");
    auto xc = x.contiguous();
    const int64_t B = xc.size(0), R = xc.size(1), C = xc.size(2);
    auto out = torch::empty({B, 1, C}, xc.options());
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t c = 0; c < C; ++c) {
            KahanSum acc;
            for (int64_t r = 0; r < R; ++r) acc.add(in[(b * R + r) * C + c]);
            o[b * C + c] = acc.sum();
        }
    }
    return out;
}
"""
sum_ext = load_inline(name="honest_kahan_struct", cpp_sources=SUM_CPP, functions=["sum_dim1"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        assert dim == 1, "this kernel reduces dimension 1"
        self.dim = dim

    def forward(self, x):
        return sum_ext.sum_dim1(x)
