"""HONEST, REJECTED by `apply --check`: a model whose output is a Python float, and a kernel that computes it in
another order. Both this model and the kernel are written here, with the few names `apply --check` asks of the
helper it generates (`CLASS`, `SOURCE`, `matches`, `install`), so the check runs without a build.

(1) What happened: `kevin_tui/usermodel/check.py::compare` compared a Python float with `==`: the model's
    `.sum().item()` of float32 values and the kernel's float64-accumulated total (more exact) differ in the last
    digits, so the check failed with "outputs differ: output is 511.93... where the model gave 511.94...".
(2) TRUE verdict: passes (within float32's tolerance, as eval's judge takes a Python float).
(3) GOT before the fix: passed False, "outputs differ" (tests/test_redteam18.py); after: passed True.
(4) Weakness: a float was the one output compared exactly. Now it is judged as eval's judge does
    (`judge.compare_number`, in the tolerance of the model's widest float dtype: `check.model_output`).
"""

import torch
from torch import nn

CLASS = "Model"
SOURCE = "honest_float_total_apply.py"


class Model(nn.Module):
    """Looks up rows of a table and returns their total as a Python number (a score, a loss for logging)."""

    def __init__(self, rows: int = 4096, width: int = 256) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(rows, width))

    def forward(self, ids: torch.Tensor) -> float:
        return self.table[ids].sum().item()


class ModelNew(Model):
    """The same total, accumulated in float64: more exact than the model's float32 sum."""

    def forward(self, ids: torch.Tensor) -> float:
        return float(self.table[ids].double().sum())


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.score = Model()

    def forward(self, ids: torch.Tensor) -> float:
        return self.score(ids)


def matches(model: nn.Module) -> list[tuple[str, nn.Module, str | None]]:
    return [(path, module, None) for path, module in model.named_modules() if type(module).__name__ == CLASS]


def install(model: nn.Module, enabled: bool = True, backward: str = "recompute") -> nn.Module:
    for path, module, _ in matches(model):
        new = ModelNew.__new__(ModelNew)
        new.__dict__.update(module.__dict__)
        parent = model.get_submodule(path.rpartition(".")[0]) if "." in path else model
        setattr(parent, path.rpartition(".")[2], new)
    return model
