from kevin_tui.evaluator.host.static_checks import run_static_checks
from tests.conftest import candidate


def codes(source: str) -> set[str]:
    return {w.code for w in run_static_checks(source)}


def test_legitimate_cuda_candidate_is_not_flagged():
    assert codes(candidate("relu_cuda.py")) == set()


def test_legitimate_cpp_candidate_is_not_flagged():
    assert codes(candidate("relu_cpp.py")) == set()


def test_pure_pytorch_has_no_custom_kernel():
    assert "no_custom_kernel" in codes(candidate("relu_torch.py"))


def test_functional_ops_in_forward_are_flagged():
    src = """
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline
class ModelNew:
    def forward(self, x):
        return F.relu(x)
"""
    assert "torch_compute_ops" in codes(src)


def test_calling_an_nn_module_is_flagged_but_holding_its_weights_is_not():
    holding = """
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bias = nn.Parameter(torch.zeros(8))
    def forward(self, x):
        return ext.conv(x, self.conv.weight, self.bias)
"""
    calling = holding.replace("ext.conv(x, self.conv.weight, self.bias)", "self.conv(x)")
    assert "torch_compute_ops" not in codes(holding)
    assert "torch_compute_ops" in codes(calling)


def test_try_except_fallback():
    src = """
class ModelNew:
    def forward(self, x):
        try:
            return ext.relu(x)
        except Exception:
            return x.clamp(min=0)
"""
    assert "try_except_fallback" in codes(src)


def test_subclassing_the_reference():
    assert "subclass_reference" in codes("class ModelNew(Model):\n    pass\n")


def test_streams_in_python_and_cuda():
    assert "creates_streams" in codes(candidate("side_stream.py"))
    cuda = 'src = """\ncudaStream_t s; cudaStreamCreate(&s);\n"""\nclass ModelNew: pass\n'
    assert "creates_streams" in codes(cuda)
    commented = 'src = """\n// cudaStreamCreate is not used here\n__global__ void k() {}\n"""\nclass ModelNew: pass\n'
    assert "creates_streams" not in codes(commented)


def test_dangerous_calls():
    for snippet in (
        "import os\nos.system('rm -rf ~')",
        "import subprocess\nsubprocess.run(['ls'])",
        "import shutil\nshutil.rmtree('/tmp/x')",
        "import socket\nsocket.socket()",
    ):
        assert "dangerous_call" in codes(snippet + "\nclass ModelNew: pass\n"), snippet


def test_monkey_patching():
    assert "monkey_patch" in codes(candidate("patched_timer.py"))
    assert "monkey_patch" in codes(candidate("patched_allclose.py"))
    assert "monkey_patch" in codes("import torch\nsetattr(torch, 'allclose', None)\nclass ModelNew: pass\n")


def test_the_word_load_inline_in_a_docstring_is_not_a_kernel():
    src = '''"""Uses load_inline and a __global__ kernel, honestly."""
import torch
class ModelNew:
    def forward(self, x):
        return x.clamp(min=0)
'''
    assert {"no_custom_kernel", "torch_compute_ops"} <= codes(src)


def test_a_build_through_an_alias_is_a_kernel():
    src = "from torch.utils import cpp_extension as ce\next = ce.load_inline(name='k', cpp_sources='')\nclass ModelNew: pass\n"
    assert "no_custom_kernel" not in codes(src)
    triton = "import triton\n@triton.jit\ndef k(x):\n    pass\nclass ModelNew: pass\n"
    assert "no_custom_kernel" not in codes(triton)


def test_compute_is_found_in_helpers_methods_operators_and_aliases():
    for body in (
        "def helper(x):\n    return x @ x\nclass ModelNew:\n    def forward(self, x):\n        return helper(x)\n",
        "class ModelNew:\n    def forward(self, x, w):\n        return x.matmul(w)\n",
        "import torch.nn.functional as nnf\nact = nnf.relu\nclass ModelNew:\n    def forward(self, x):\n        return act(x)\n",
        "import torch\nf = torch.nn.functional\nclass ModelNew:\n    def forward(self, x):\n        return f.gelu(x)\n",
    ):
        assert "torch_compute_ops" in codes(body), body


def test_the_extensions_own_functions_are_not_torch_compute():
    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        "ext = load_inline(name='k', cpp_sources='', functions=['relu'])\n"
        "class ModelNew:\n    def forward(self, x):\n        return ext.relu(x)\n"
    )
    assert codes(src) == set()


def test_suppress_is_a_fallback_and_introspection_is_named():
    suppress = "import contextlib\nclass ModelNew:\n    def forward(self, x):\n        with contextlib.suppress(Exception):\n            return ext.k(x)\n"
    assert "try_except_fallback" in codes(suppress)
    for snippet in ("import sys\nsys._getframe(1)", "import gc\ngc.get_referrers(1)", "import ctypes",
                    "import torch\ngetattr(torch, name)"):  # fmt: skip
        assert "introspection" in codes(snippet + "\nclass ModelNew: pass\n"), snippet


def test_an_nn_module_made_and_called_in_place_or_by_a_plain_name_is_flagged():
    """redteam4: `nn.ReLU()(x)` and `act = nn.GELU(); act(x)` were not seen (only `self.conv(x)` was), so the
    static check missed PyTorch compute that the runtime count alone could see (and a candidate can detect
    that count's dispatch mode). Holding a module's weights by a plain name stays fine."""
    inline = """
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return nn.ReLU()(ext.copy(x))
"""
    named = """
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        act = nn.GELU()
        return act(ext.copy(x))
"""
    holding = """
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.Linear(4, 4)
        self.weight = nn.Parameter(layer.weight.detach().clone())
    def forward(self, x):
        return ext.linear(x, self.weight)
"""
    assert "torch_compute_ops" in codes(inline)
    assert "torch_compute_ops" in codes(named)
    assert "torch_compute_ops" not in codes(holding)


def test_tensor_arithmetic_in_forward_is_compute_but_arithmetic_on_sizes_is_not():
    """redteam4 (`strict_arithmetic_hides_from_the_count.py`): `y * (y > 0)` on what an extension returned is
    a ReLU in PyTorch ops that the syntax tree did not see, and forward hid it from the runtime count by
    looking at the dispatch mode stack, which is named now as introspection. Sizes stay numbers."""
    hiding = """
import torch
import torch.nn as nn
counted = torch._C._len_torch_dispatch_stack
class ModelNew(nn.Module):
    def forward(self, x):
        y = ext.copy(x.contiguous())
        if counted():
            return ext.relu(y)
        return y * (y > 0)
"""
    sizes = """
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
ext = load_inline(name="e", cpp_sources=SOURCE, functions=["relu"])
class ModelNew(nn.Module):
    def forward(self, x, dim: int = 1):
        n = x.numel()
        rows = x.size(0) * 2
        blocks = (n + 255) // 256
        if x.dim() > 2 and rows > blocks:
            return ext.relu(x.view(x.shape[0] * x.shape[1], -1), blocks)
        return ext.relu(x, blocks)
"""
    assert {"torch_compute_ops", "introspection"} <= codes(hiding)
    assert codes(sizes) == set()
