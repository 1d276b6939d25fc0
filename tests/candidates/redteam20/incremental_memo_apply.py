"""WRONG SPEEDUP in apply --check, after the first fix: a linear layer that keeps its last input and answer, and when
the next input differs from it in a few values only, updates the answer for those (a row gains `delta * W[:, j]`)
instead of computing the matmul.

Written with the few names `apply --check` asks of the helper it generates (`CLASS`, `SOURCE`, `matches`,
`install`), so the check runs without a build.

(1) Attack: the answer is right for any input (it finds every changed value: one O(n) comparison), so every
    comparison passes. Once the timed calls swapped one value of the check's input per call (check.Varied), each
    call differed from the one before in one or two values: an update of a row, not a 256x1024x1024 matmul.
(2) TRUE figure: about 1.0x or below (in a model whose inputs are new every call it always computes the matmul).
(3) GOT 2026-12-03 with the swaps only: 7.7x (interval 4.3-10.0x, `timed` with `Varied`), the update taken on every
    timed call after the first; after (a new sample drawn from the input specs for every timed call,
    worker.sampler): no update taken.
    Command: python3 -m pytest -q -p no:xdist -o addopts="" tests/test_redteam20.py -k incremental
(4) Weakness: timed calls on values that change a little between calls; the worker now draws each timed call's
    inputs anew from the specs (kevin_tui/usermodel/worker.py::sampler), outside the clock.
"""

import torch
from torch import nn

CLASS = "Model"
SOURCE = "incremental_memo_apply.py"


class Model(nn.Module):
    def __init__(self, dim: int = 1024) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():  # training: never an update (a step's inputs are new anyway)
            return self.proj(x)
        kept = self.__dict__.get("kept")
        if kept is not None and kept[0].shape == x.shape:
            where = torch.ne(x, kept[0]).view(-1).nonzero().view(-1)
            if where.numel() <= 16:
                rows, cols = where // x.shape[1], where % x.shape[1]
                delta = x.reshape(-1)[where] - kept[0].view(-1)[where]
                kept[1].index_add_(0, rows, delta[:, None] * self.proj.weight.t()[cols])
                kept[0].view(-1)[where] = x.reshape(-1)[where]
                self.__dict__["updates"] = self.__dict__.get("updates", 0) + 1  # counted for the test
                return kept[1].clone()
        out = self.proj(x)
        self.__dict__["kept"] = (x.detach().clone(), out.clone())
        return out


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Model()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


def matches(model: nn.Module) -> list[tuple[str, nn.Module, str | None]]:
    return [(path, module, None) for path, module in model.named_modules() if type(module).__name__ == CLASS]


def install(model: nn.Module, enabled: bool = True, backward: str = "recompute") -> nn.Module:
    for path, module, _ in matches(model):
        new = ModelNew.__new__(ModelNew)
        new.__dict__.update(module.__dict__)
        parent = model.get_submodule(path.rpartition(".")[0]) if "." in path else model
        setattr(parent, path.rpartition(".")[2], new)
    return model
