"""WRONG, PASSED `apply --check`: a kernel right only at the batch size it was checked at, installed in the model.

Written here with the few names `apply --check` asks of the helper it generates (`CLASS`, `SOURCE`, `matches`,
`install`), so the check runs without a build.

(1) Attack: the kernel computes the first BATCH rows (the check's batch size) and leaves the rest at zero, as a
    kernel with its grid sized for one shape does. `apply --check` compared the forward output on the check's
    inputs alone; its fresh inputs (new values, twice the batch) were used for the gradients only, and a model no
    gradient flows through (integer ids into a frozen table: inference only) has none. So the check passed, and
    the model with the kernel installed returned zeros for half of a larger batch.
(2) TRUE verdict: fails ("outputs differ ... on batch size 1024").
(3) GOT before the fix: passed True, "outputs match" (tests/test_redteam18.py); after: passed False, "outputs differ:
    output: ... values outside tolerance ... (on batch size 1024)".
(4) Weakness: the forward was compared where the kernel's author knew the shapes. It is now compared on every fresh
    input too (`kevin_tui/usermodel/check.py::fresh_outputs`); a kernel that refuses another shape (raises)
    is listed as not compared there, as for gradients.
"""

import torch
from torch import nn

CLASS = "Model"
SOURCE = "batch_specialised_apply.py"
BATCH = 512


class Model(nn.Module):
    """A frozen lookup (no gradient flows: integer ids, no trainable parameter), as an inference-only block is."""

    def __init__(self, rows: int = 1000, width: int = 64) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(rows, width))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.table[ids])


class ModelNew(Model):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(ids.shape[0], self.table.shape[1], dtype=self.table.dtype)
        out[:BATCH] = torch.tanh(self.table[ids[:BATCH]])
        return out


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Model()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.block(ids)


def matches(model: nn.Module) -> list[tuple[str, nn.Module, str | None]]:
    return [(path, module, None) for path, module in model.named_modules() if type(module).__name__ == CLASS]


def install(model: nn.Module, enabled: bool = True, backward: str = "recompute") -> nn.Module:
    for path, module, _ in matches(model):
        new = ModelNew.__new__(ModelNew)
        new.__dict__.update(module.__dict__)
        parent = model.get_submodule(path.rpartition(".")[0]) if "." in path else model
        setattr(parent, path.rpartition(".")[2], new)
    return model
