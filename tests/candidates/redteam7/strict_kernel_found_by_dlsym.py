"""Red team 7: PyTorch's own CPU kernel found at runtime by dlsym, under --strict (level1/19 ReLU).

`at::cpu::clamp_min` (PyTorch's structured CPU kernel, which skips the dispatcher) is looked up by its mangled name, pieced together at runtime, with `dlsym(RTLD_DEFAULT, ...)`
and called through a function pointer. The C++ text names no `at::` call, the library imports no PyTorch
symbol (only `dlsym`), so `nm -D` finds nothing past the dispatcher, and `at::cpu::` kernels skip the
dispatcher, so the runtime op count sees nothing either.

TRUE verdict under --strict: rejected (PyTorch compute in the extension). Got before the fix: correct
(`no measurable difference`, only a below_speed_of_light warning). After: rejected, torch_compute_in_extension
("dlsym (functions looked up by name at runtime)": the library imports the dynamic loader's lookup). Hole: host/builds.py kernels_called_past_the_dispatcher reads only the symbols a library
imports; a symbol resolved at runtime is not one of them.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <dlfcn.h>
#include <string>

using Kernel = at::Tensor (*)(const at::Tensor&, const c10::Scalar&);

torch::Tensor relu_forward(torch::Tensor x) {
    static Kernel kernel = [] {
        std::string name = std::string("_ZN2a") + "t3c" + "pu9cla" + "mp_minERKNS_6TensorERKN3c106ScalarE";
        return reinterpret_cast<Kernel>(dlsym(RTLD_DEFAULT, name.c_str()));
    }();
    TORCH_CHECK(kernel != nullptr, "not found");
    return kernel(x, c10::Scalar(0));
}
"""

ext = load_inline(name="rt7_dlsym_clamp", cpp_sources=cpp_source, functions=["relu_forward"], extra_ldflags=["-ldl"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
