"""Attacks a thirteenth red team wrote against what --strict rests on: the runtime op count and compute done by
something that is neither a kernel nor a PyTorch op (tests/candidates/redteam13/, each file's docstring says the
attack, its true verdict and what it got before the fix)."""

from __future__ import annotations

import copy
import importlib.util
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch import nn

from kevin_tui.evaluator.host.static_checks import run_static_checks
from kevin_tui.evaluator.verdict import Status
from kevin_tui.evaluator.worker.guards import Elsewhere
from kevin_tui.usermodel.apply import CheckOptions, apply_kernel
from kevin_tui.usermodel.problems import make_problem
from kevin_tui.usermodel.specs import ModelSpec
from tests.conftest import CANDIDATES, candidate


def _codes(warnings) -> list[str]:
    return [w.code for w in warnings]


# -- static: the work done by another array library ---------------------------------------------------------------

OTHER_LIBRARIES = {
    "np.clip on x.numpy()": candidate("redteam13/numpy_compute.py"),
    "a function imported by name": "from numpy import clip\ndef f(x):\n    return clip(x, 0, None)\n",
    "an ndarray's own method": "def f(x):\n    return x.numpy().clip(0)\n",
    "__array__": "def f(x):\n    return x.__array__().clip(0)\n",
    "scipy": "from scipy import special\ndef f(x):\n    return special.expit(x)\n",
    "kept in a list": "import numpy as np\nOPS = [np.maximum]\n",
    "a constant getattr": "import numpy\ndef f(x):\n    return getattr(numpy, 'cl' + 'ip')(x, 0, None)\n",
    "DLPack": "import torch.utils.dlpack as d\ndef f(x):\n    return d.to_dlpack(x)\n",
}


@pytest.mark.parametrize("how", sorted(OTHER_LIBRARIES))
def test_compute_in_another_array_library_is_a_finding(how):
    """numpy_compute.py: `np.clip(x.numpy(), 0, None)` beside an extension that only copies was `correct` under
    --strict with no warning: numpy's work is no PyTorch name the static checks know and no op the count sees."""
    assert "library_compute" in _codes(run_static_checks(OTHER_LIBRARIES[how])), how


def test_numpy_types_and_constants_and_python_math_are_not_library_compute():
    source = (
        "import math\nimport numpy as np\n"
        "SCALE = math.sqrt(2.0)\nEPS = np.finfo(np.float32).eps\nKINDS = (np.float16, np.float32, np.pi)\n"
    )
    assert "library_compute" not in _codes(run_static_checks(source))


SYS_MODULES = {
    "a probe of the op count's mode": (
        "introspection",
        "import sys\nm = sys.modules['torch.utils._python_dispatch']\n",
    ),
    "torch's functional module": (
        "torch_compute_ops",
        "import sys\ndef f(x):\n    return sys.modules['torch.nn.functional'].relu(x)\n",
    ),
    "with .get": (
        "torch_compute_ops",
        "import sys\ndef f(x):\n    return sys.modules.get('torch.nn.' + 'functional').gelu(x)\n",
    ),
}


@pytest.mark.parametrize("how", sorted(SYS_MODULES))
def test_a_module_taken_from_sys_modules_by_a_constant_name_is_that_module(how):
    """op_count_detected.py read the op count's dispatch mode as `sys.modules["torch.utils._python_dispatch"]`,
    which the probe names did not follow (nor `sys.modules["torch.nn.functional"].relu` as compute)."""
    code, source = SYS_MODULES[how]
    assert code in _codes(run_static_checks(source)), how


COMPUTED_IMPORTS = {
    "import_module": "import importlib\nnp = importlib.import_module(''.join(['nu', 'mpy']))\n",
    "an alias of it": "from importlib import import_module as im\ndef f(name):\n    return im(name)\n",
    "sys.modules": "import sys\ndef f(name):\n    return sys.modules[name]\n",
}


@pytest.mark.parametrize("how", sorted(COMPUTED_IMPORTS))
def test_a_module_imported_by_a_computed_name_is_introspection(how):
    """A module named by something the source does not spell out (numpy as `"".join(["nu", "mpy"])`) is a way round
    every list of names, library_compute's included."""
    assert "introspection" in _codes(run_static_checks(COMPUTED_IMPORTS[how])), how


def test_a_plain_fact_from_sys_modules_is_no_finding():
    assert _codes(run_static_checks("import sys\nVERSION = sys.modules['torch'].__version__\n")) == ["no_custom_kernel"]


# -- the runtime op count: fresh inputs, its output judged, and what it cannot see named ----------------------------


def test_elsewhere_names_a_pool_thread_beside_the_counted_call_and_nothing_when_alone():
    """op_count_pool.py in small: the count is a dispatch mode, which sees only the thread it is entered on; a pool
    thread the candidate keeps (idle between calls, so no tripwire's "left running") did the arithmetic."""
    watch = Elsewhere()
    assert watch.around(lambda: 1) == (1, [])
    pool = ThreadPoolExecutor(1)
    try:
        two, found = watch.around(lambda: pool.submit(lambda: 2).result())
    finally:
        pool.shutdown()
    assert two == 2 and any("Python thread" in f for f in found), found


def test_a_pool_thread_that_takes_the_ident_of_a_thread_gone_since_is_still_named():
    """A thread's ident is an address, taken at once by the next thread started: a thread alive when the snapshot was
    taken (the worker's own, or the test process's teardown threads in CI) and gone since hid the candidate's pool
    thread that reused its ident, and the count's blind spot went unnamed."""
    done = threading.Event()
    earlier = threading.Thread(target=done.wait)
    earlier.start()
    watch = Elsewhere()
    done.set()
    earlier.join()
    pool = ThreadPoolExecutor(1)
    try:
        two, found = watch.around(lambda: pool.submit(lambda: 2).result())
        reused = any(t.ident == earlier.ident for t in threading.enumerate())
    finally:
        pool.shutdown()
    assert two == 2 and any("Python thread" in f for f in found), (found, f"ident reused: {reused}")


def test_a_replayed_answer_on_the_count_dispatches_nothing_no_more(strict):
    """op_count_replay.py: the count ran forward again on the first trial's inputs and did not judge it; a kernel
    computing ReLU with PyTorch arithmetic replayed its stored answer there, so the count saw no op: `correct`
    under --strict. The count now runs on a fresh sample."""
    verdict = strict.evaluate(candidate("redteam13/op_count_replay.py"))
    assert verdict.status is Status.REJECTED, verdict.message
    assert "torch_compute_at_runtime" in _codes(verdict.warnings), verdict.warnings


def test_a_kernel_that_tells_it_is_counted_must_still_be_right_there(strict):
    """op_count_detected.py: a kernel that reads the dispatch mode and returns its input's copy under it computed
    nothing there (`correct` under --strict); the counted call's output is judged like a trial's now."""
    verdict = strict.evaluate(candidate("redteam13/op_count_detected.py"))
    assert verdict.status is Status.INCORRECT, verdict.message
    assert "the call whose ops were counted" in verdict.message


def test_pytorch_on_a_thread_started_inside_forward_is_named(strict):
    """op_count_thread.py: PyTorch arithmetic on a thread started and joined inside forward (nothing left running)
    escaped the thread-local count: `correct` under --strict. A task started in the sandbox's PID namespace during
    the counted call shows in its last id, so this needs a sandbox (the pool thread is seen without one)."""
    if strict.sandbox.kind == "off":
        pytest.skip("no sandbox here: no PID namespace of the worker's own")
    verdict = strict.evaluate(candidate("redteam13/op_count_thread.py"))
    assert verdict.status is Status.REJECTED, verdict.message
    assert "ops_unseen" in _codes(verdict.warnings) and "started during the counted call" in verdict.message


def test_an_honest_kernel_is_counted_whole_and_judged_on_fresh_inputs(strict):
    """The honest twin: a C++ ReLU, no threads of its own, stays correct under --strict; its counted call is judged."""
    verdict = strict.evaluate(candidate("relu_cpp.py"))
    assert verdict.status is Status.CORRECT, verdict.message
    assert "ops_unseen" not in verdict.details and not verdict.details.get("op_counts")
    counted = [c for c in verdict.checks if "ops were counted" in c.name]
    assert counted and all(c.passed for c in counted), verdict.checks


# -- apply --check: a kernel proven in one mode (train or eval) runs only there -------------------------------------


class Gate(nn.Module):
    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.tanh(self.proj(x)))


def _with_block(block: nn.Module, model: nn.Module) -> nn.Module:
    after = copy.deepcopy(model)
    after[1] = block
    after[1].load_state_dict(model[1].state_dict(), strict=False)
    return after


def test_the_other_mode_is_proven_only_where_the_model_with_the_kernel_computes_the_same():
    """The rule, without a worker: a block whose dropout the kernel leaves out is proven in eval mode only; a block
    that computes alike in both modes (the honest twin: no dropout, or its kernel is the block itself) in both."""
    from kevin_tui.usermodel.check import proven_modes  # here: before the fix there was none

    torch.manual_seed(0)
    args = [torch.randn(16, 8)]
    dropping = nn.Sequential(nn.Linear(8, 8), Gate(0.5)).eval()
    no_dropout = Gate(0.0)
    assert proven_modes(dropping, _with_block(no_dropout, dropping), args, None, None)[0] == ["eval"]
    assert proven_modes(dropping, copy.deepcopy(dropping), args, None, None) == (["eval", "train"], None)
    plain = nn.Sequential(nn.Linear(8, 8), Gate(0.0)).train()
    assert proven_modes(plain, _with_block(Gate(0.0), plain), args, None, None) == (["train", "eval"], None)


def test_apply_check_keeps_a_kernel_without_dropout_out_of_training(tmp_path, monkeypatch, build_cache):
    """dropout_left_out_kernel.py: judged and checked in eval mode, it was installed for training too (no dropout
    there); the helper now runs the block's own forward in train mode."""
    project = tmp_path / "proj"
    shutil.copytree(CANDIDATES / "redteam13" / "dropnet", project / "dropnet")
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    make_problem(ModelSpec.parse("dropnet/blocks.py:DropGate", "dim=16", ["x=float32[8,16]"], "eval"), "cpu",
                 Path("problems"))  # fmt: skip
    kernel = Path("problems/blocks_DropGate_kernel.py")
    shutil.copyfile(CANDIDATES / "redteam13" / "dropout_left_out_kernel.py", kernel)
    options = CheckOptions(device="cpu", rounds=2, steps=0, compile=False)
    applied = apply_kernel(kernel, check=True, options=options, git=False)
    assert applied.passed and applied.check and applied.check["modes"] == ["eval"], applied.check
    assert any("runs in eval mode only" in line for line in applied.lines())
    helper = _imported(project / applied.helper)
    from dropnet.model import build_model

    model = build_model()  # train mode, as built
    installed = helper.install(copy.deepcopy(model))
    assert type(installed[1]).__name__ == "ModelNew" and helper.MODES == ("eval",)
    x = torch.randn(32, 16)
    outputs = []
    for module in (model, installed):
        torch.manual_seed(3)
        outputs.append(module(x))
    assert torch.equal(*outputs)  # the same dropout: DropGate's own forward ran
    for name in [n for n in sys.modules if n.split(".")[0] in ("dropnet", "problems")]:
        del sys.modules[name]


def _imported(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"rt13_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
