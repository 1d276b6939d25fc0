from kevin_tui.evaluator.static_checks import run_static_checks
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
