"""Red team 22 (wrong verdict in `apply --check`): a Linear kernel that keeps the weight transposed (and the bias)
from its first call without gradients and never looks at them again; with gradients on (a training step) it
computes from the live parameters. `apply --check` changed the parameters only inside its optimizer steps, where
gradients are on, and never called the model without gradients after them, so the stale copy was never seen: it
passed. In a model that is trained and then evaluated under `torch.no_grad()` (every validation loop) it answers
with the weights of before training.

Written with the few names `apply --check` asks of the helper it generates (`CLASS`, `SOURCE`, `matches`,
`install`), so the check runs without a build.

True verdict: fails (outputs differ after the optimizer steps).
"""

import torch
from torch import nn

CLASS = "Model"
SOURCE = "linear_nograd_weight_cache_apply.py"


class Model(nn.Module):
    def __init__(self, dim: int = 256) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            return self.proj(x)
        kept = self.__dict__.get("_kept")
        if kept is None:
            kept = (self.proj.weight.detach().t().contiguous(), self.proj.bias.detach().clone())
            self.__dict__["_kept"] = kept
        return torch.addmm(kept[1], x, kept[0])


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
