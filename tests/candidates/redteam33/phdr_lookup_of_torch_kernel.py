"""Red team 33: PyTorch's own CPU kernel found by walking the loaded libraries, in a library the host built.

The host reads a built library's imports (`nm -D --undefined-only`) for the dynamic loader's lookups (`dlsym`,
`dlopen`), whose finds are called past every check. `dl_iterate_phdr` is another: it lists every loaded library with
its dynamic section, and reading the symbol tables there finds `at::cpu::clamp_min` (a mangled name in a string
literal, which the text scans leave alone) without a `dlsym`. Called through a pointer, past the dispatcher: the op
count sees nothing, the text names no PyTorch call and the imports name none.
Got before the fix: `correct` under --strict, no finding.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

WALK_CPP = r"""
#include <link.h>
#include <cstring>

using Kernel = at::Tensor (*)(const at::Tensor&, const c10::Scalar&);
static const char* WANTED = "_ZN2at3cpu9clamp_minERKNS_6TensorERKN3c106ScalarE";
static void* found_at = nullptr;

static int visit(struct dl_phdr_info* info, size_t, void*) {
    if (!info->dlpi_name || !std::strstr(info->dlpi_name, "libtorch_cpu")) return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        auto* dyn = reinterpret_cast<ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        const ElfW(Sym)* symbols = nullptr;
        const char* strings = nullptr;
        size_t string_bytes = 0;
        for (; dyn->d_tag != DT_NULL; ++dyn) {
            ElfW(Addr) where = dyn->d_un.d_ptr;
            if (where < info->dlpi_addr) where += info->dlpi_addr;
            if (dyn->d_tag == DT_SYMTAB) symbols = reinterpret_cast<const ElfW(Sym)*>(where);
            if (dyn->d_tag == DT_STRTAB) strings = reinterpret_cast<const char*>(where);
            if (dyn->d_tag == DT_STRSZ) string_bytes = dyn->d_un.d_val;
        }
        if (!symbols || !strings || reinterpret_cast<const char*>(symbols) >= strings) continue;
        size_t count = (strings - reinterpret_cast<const char*>(symbols)) / sizeof(ElfW(Sym));
        for (size_t k = 0; k < count; ++k) {
            if (symbols[k].st_value && symbols[k].st_name < string_bytes && std::strcmp(strings + symbols[k].st_name, WANTED) == 0) {
                found_at = reinterpret_cast<void*>(info->dlpi_addr + symbols[k].st_value);
                return 1;
            }
        }
    }
    return 0;
}

torch::Tensor walk_relu(torch::Tensor x) {
    if (!found_at) dl_iterate_phdr(visit, nullptr);
    TORCH_CHECK(found_at != nullptr, "not found");
    Kernel kernel = reinterpret_cast<Kernel>(found_at);
    return kernel(x, 0);
}
"""
walk_ext = load_inline(name="redteam33_phdr_walk", cpp_sources=WALK_CPP, functions=["walk_relu"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return walk_ext.walk_relu(x)
