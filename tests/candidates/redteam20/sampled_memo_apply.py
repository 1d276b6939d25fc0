"""WRONG, PASSED `apply --check` (and a wrong speedup): a kernel that remembers its answers keyed on the input's shape,
its data pointer and eight of its values (the first, the last and six fixed positions between).

Written with the few names `apply --check` asks of the helper it generates (`CLASS`, `SOURCE`, `matches`,
`install`), so the check runs without a build.

(1) Attack: the key is cheap (eight values), and every input `apply --check` compared differed from the ones before
    it at those eight positions (the check's own, then new values, then twice the batch), so the memo never hit
    there and every comparison passed; the timed calls repeat the check's values, so each one after the first is a
    hit. In a model, an input that differs from an earlier one elsewhere than at those positions gets the earlier
    input's output: wrong.
(2) TRUE verdict: fails ("outputs differ ... (on a few values changed)").
(3) GOT 2026-12-03, before the fix (256x1024 input): passed True, "outputs match", 170x (interval 157-571x);
    after: passed False, "outputs differ: output: 59724 of 262144 values outside tolerance ... (on the check's
    inputs with a few values changed in place)".
    Command: python3 -m pytest -q -p no:xdist -o addopts="" tests/test_redteam20.py -k address_and
(4) Weakness: the forward was compared on inputs that each differed everywhere from the ones before; it is now
    compared on the check's inputs with a few values taken from a fresh sample too, as eval's near-duplicate trials
    are (kevin_tui/usermodel/check.py::changed_in_place_differs, with evaluator/worker/inputs.py::near_duplicate).
"""

import torch
from torch import nn

CLASS = "Model"
SOURCE = "sampled_memo_apply.py"


class Model(nn.Module):
    def __init__(self, dim: int = 1024) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():  # training: never a hit (a step's inputs are new anyway)
            return self.proj(x)
        flat = x.reshape(-1)
        picks = torch.linspace(0, flat.numel() - 1, 8).long().to(x.device)
        key = (tuple(x.shape), x.dtype, x.data_ptr(), tuple(flat[picks].tolist()))
        memo = self.__dict__.setdefault("_memo", {})
        if key not in memo:
            memo[key] = self.proj(x)
        return memo[key]


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
