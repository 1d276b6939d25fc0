"""WRONG SPEEDUP in apply --check: a kernel that remembers its last answer keyed on a checksum of all of its input's
values (two O(n) dot products with fixed random weights: the identity-and-version key of
redteam16/memo_by_identity_apply_speedup.py, made value-based so moving the version on does not miss).

Written with the few names `apply --check` asks of the helper it generates (`CLASS`, `SOURCE`, `matches`,
`install`), so the check runs without a build.

(1) Attack: the answer is right for any input (the key reads every value; a collision needs two inputs equal under
    two random projections), so every comparison passes; the checksum costs O(n) where the linear costs O(n*d).
    `apply --check` times the model with the kernel on the check's own inputs, the same values call after call
    (check.inference only moves the version counter on), so every timed call after the first is a hit.
(2) TRUE figure: about 1.0x (the kernel is torch's own linear, plus a checksum); in a model whose inputs change
    every call it is never faster.
(3) GOT 2026-12-03, before the fix: check() on a 256x1024 input, 1024->1024 linear: `outputs match`, 51x
    (interval 43-60x; `timed` alone 34-96x over runs on this loaded 2-core machine), every timed call after the
    first a hit (42 of them in the test's smaller case); after: 1.00x (0.89-1.30x), no hit.
    Command: python3 -m pytest -q -p no:xdist -o addopts="" tests/test_redteam20.py -k every_value
(4) Weakness: the timed calls all ran on identical values; now each runs on a new sample drawn from the input specs
    before its clock starts (kevin_tui/usermodel/worker.py::sampler), or, for a caller of check() without specs,
    on the check's values with one of each tensor swapped before every call (kevin_tui/usermodel/check.py::Varied:
    the test's path, where the checksum never hits).
"""

import torch
from torch import nn

CLASS = "Model"
SOURCE = "content_memo_apply.py"


class Model(nn.Module):
    def __init__(self, dim: int = 1024) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1)
        memo = self.__dict__.get("_memo")
        if torch.is_grad_enabled():  # training: never a hit (a step's inputs are new anyway)
            return self.proj(x)
        weights = self.__dict__.get("_weights")
        if weights is None or weights.shape != (2, flat.numel()):
            generator = torch.Generator().manual_seed(12345)
            weights = torch.randn(2, flat.numel(), generator=generator).to(x.device, x.dtype)
            self.__dict__["_weights"] = weights
        key = (tuple(x.shape), x.dtype, tuple((weights @ flat).tolist()))
        if memo is not None and memo[0] == key:
            self.__dict__["hits"] = self.__dict__.get("hits", 0) + 1  # counted for the test
            return memo[1]
        out = self.proj(x)
        self.__dict__["_memo"] = (key, out)
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
