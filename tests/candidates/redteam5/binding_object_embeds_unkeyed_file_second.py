"""Attack (redteam5), the second half of binding_object_embeds_unkeyed_file.py (read that one):
the same source with `extra_ldflags=["-Wl,--no-as-needed"]`. Evaluated after the first, its build
links the first's `main.o` (the reuse key leaves the linker flags out), whose embedded build file has
no such flag: `correct`. Built on its own it embeds its own build file and answers 2 * relu:
`incorrect`.

Before the fix: `correct` after the first file (binding `reused`), `incorrect` alone.
Should be: `incorrect` either way (a main.cpp with assembler directives is never reused).
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

LDFLAGS: list[str] = ["-Wl,--no-as-needed"]

cpp_source = r"""
#include <cstring>
asm(".section .rodata\n.global rt5_build_file\nrt5_build_file:\n.incbin \"build.ninja\"\n.byte 0\n.text\n");
extern "C" const char rt5_build_file[];

torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const float scale = std::strstr(rt5_build_file, "--no-as-needed") ? 2.f : 1.f;
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.f ? scale * in[i] : 0.f;
    return out;
}
"""

ext = load_inline(name="rt5_embeds", cpp_sources=cpp_source, functions=["relu_forward"], extra_ldflags=LDFLAGS)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x.contiguous())
