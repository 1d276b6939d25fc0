"""Honest (must pass `apply --check`): the twin of linear_nograd_weight_cache_apply.py, whose copy of the
converted weight follows the parameters' version counters (an optimizer step moves them on) and addresses (a copy of
the model has others): the outputs without gradients after the optimizer steps match.
"""

import torch
from torch import nn

CLASS = "Model"
SOURCE = "honest_linear_versioned_weight_cache_apply.py"


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
        weight, bias = self.proj.weight, self.proj.bias
        key = (weight._version, bias._version, weight.data_ptr(), bias.data_ptr())
        kept = self.__dict__.get("_kept")
        if kept is None or kept[0] != key:
            kept = (key, weight.detach().t().contiguous(), bias.detach().clone())
            self.__dict__["_kept"] = kept
        return torch.addmm(kept[2], x, kept[1])


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
