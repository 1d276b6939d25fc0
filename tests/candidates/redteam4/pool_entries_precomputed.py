"""Attack (redteam4): the timing pool is built inside the candidate's process by calling the problem's own
`get_inputs`, which the candidate can rebind (the problem module sits in `sys.modules`). Its wrapper hands
the pool GELU(x) instead of x; every timed input, a 0/1 mix of pool entries, is then already the answer
(an elementwise function commutes with the mix), so forward only copies it. The trials (inputs from the
reference's files) get an honest C++ GELU. Measured on the loaded 2-core CPU (level1/26, 1 MB input): `correct`,
measured 1.13x, interval 0.62-1.62x, headline 1.0 ("no measurable difference"): the interval hid it here, the
loop's own work being several times the kernel's; on larger inputs or a GPU the gain is the kernel's whole time.
Open (not fixed): see /work/notes/redteam4.md and the README's "not prevented" list."""

import sys

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = """
#include <cmath>
#include <cstring>
torch::Tensor gelu(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = 0.5f * in[i] * (1.f + std::erf(in[i] * 0.70710678118654752f));
    return out;
}
torch::Tensor copy(torch::Tensor x) {
    auto out = torch::empty_like(x);
    std::memcpy(out.data_ptr<float>(), x.data_ptr<float>(), x.numel() * sizeof(float));
    return out;
}
"""

ext = load_inline(name="rt4_pool_gelu", cpp_sources=SOURCE, functions=["gelu", "copy"], extra_cflags=["-O2"])

problem = sys.modules["kevin_reference"]
drawn = problem.get_inputs
answers: list[float] = []  # a few values of the pool's (already answered) entries


def answered_inputs():
    values = [ext.gelu(x.contiguous()) for x in drawn()]
    answers.extend(values[0].reshape(-1)[:4].tolist())
    return values


problem.get_inputs = answered_inputs


class ModelNew(nn.Module):
    def forward(self, x):
        head = x.reshape(-1)[:4].tolist()
        if answers and all(v in answers for v in head):  # a timed call: its input is the answer already
            return ext.copy(x.contiguous())
        return ext.gelu(x.contiguous())
