"""Attack (redteam5): a binding object (`main.o`) whose contents depend on a file the reuse key does
not cover (level1/19 ReLU, CPU; run it twice: see below).

The host reuses the object of load_inline's `main.cpp` for a later build with the same key (name,
cpp_sources, functions, C++ flags, the header, the toolchain), and only when `cpp_sources` includes
nothing but `<header>`s. But the assembler reads files too: `asm(".incbin \\"build.ninja\\"")` in
`cpp_sources` embeds the build directory's `build.ninja` - which holds the linker flags, not in the
key - into `main.o`. This extension's function answers ReLU when the embedded build file has no
`--no-as-needed`, and a wrong answer when it has. Evaluate it first
(the object is recorded), then this same source with `extra_ldflags=["-Wl,--no-as-needed"]`
(`binding_object_embeds_unkeyed_file_second.py`): the second build links the first's object, so it is
`correct`, though built by itself (a fresh cache, another machine, after `--accept`) it is `incorrect`.
The verdict is for a binary its own source does not make.

Before the fix: second file `correct` (binding `reused`); alone, `incorrect`.
Should be: a main.cpp with assembler directives is never reused (the second build compiles its own:
`incorrect`, the same verdict as on its own).
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

LDFLAGS: list[str] = []

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
