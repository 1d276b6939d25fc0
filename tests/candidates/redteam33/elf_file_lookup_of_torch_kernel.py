"""Red team 33: PyTorch's own CPU kernel found by reading libtorch_cpu.so as a file, in a library the host built.

No lookup the loader offers (`dlsym`, `dl_iterate_phdr`, ...): the library reads /proc/self/maps for where
libtorch_cpu.so is loaded and the file itself (its section headers, `.dynsym` and `.dynstr`) for where
`at::cpu::clamp_min` lies in it, with plain file reads, and calls it through a pointer, past the dispatcher. No
import, no text the host scans and no op count can tell this from a library that reads a file.
Got: `correct` under --strict (open; a strict xfail in tests/test_redteam33.py).
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

READ_CPP = r"""
#include <elf.h>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>
#include <string>

using Kernel = at::Tensor (*)(const at::Tensor&, const c10::Scalar&);
static const char* WANTED = "_ZN2at3cpu9clamp_minERKNS_6TensorERKN3c106ScalarE";
static void* found_at = nullptr;

static void find() {
    FILE* maps = std::fopen("/proc/self/maps", "r");
    if (!maps) return;
    char line[4096];
    unsigned long base = 0;
    std::string path;
    while (std::fgets(line, sizeof line, maps)) {
        char* name = std::strchr(line, '/');
        if (!name || !std::strstr(name, "libtorch_cpu.so")) continue;
        unsigned long start = std::strtoul(line, nullptr, 16);
        if (!base || start < base) base = start;
        path.assign(name, std::strcspn(name, "\n"));
    }
    std::fclose(maps);
    FILE* file = path.empty() ? nullptr : std::fopen(path.c_str(), "rb");
    if (!file) return;
    Elf64_Ehdr header;
    std::fread(&header, sizeof header, 1, file);
    std::vector<Elf64_Shdr> sections(header.e_shnum);
    std::fseek(file, header.e_shoff, SEEK_SET);
    std::fread(sections.data(), sizeof(Elf64_Shdr), sections.size(), file);
    for (auto& section : sections) {
        if (section.sh_type != SHT_DYNSYM) continue;
        const Elf64_Shdr& names = sections[section.sh_link];
        std::vector<char> text(names.sh_size);
        std::fseek(file, names.sh_offset, SEEK_SET);
        std::fread(text.data(), 1, text.size(), file);
        std::vector<Elf64_Sym> symbols(section.sh_size / sizeof(Elf64_Sym));
        std::fseek(file, section.sh_offset, SEEK_SET);
        std::fread(symbols.data(), sizeof(Elf64_Sym), symbols.size(), file);
        for (auto& symbol : symbols) {
            if (symbol.st_value && symbol.st_name < text.size() && std::strcmp(&text[symbol.st_name], WANTED) == 0) {
                found_at = reinterpret_cast<void*>(base + symbol.st_value);
            }
        }
    }
    std::fclose(file);
}

torch::Tensor read_relu(torch::Tensor x) {
    if (!found_at) find();
    TORCH_CHECK(found_at != nullptr, "not found");
    Kernel kernel = reinterpret_cast<Kernel>(found_at);
    return kernel(x, 0);
}
"""
read_ext = load_inline(name="redteam33_elf_read", cpp_sources=READ_CPP, functions=["read_relu"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return read_ext.read_relu(x)
