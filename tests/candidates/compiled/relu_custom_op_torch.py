"""PyTorch's ReLU inside a torch.library custom op (and nn.ReLU(), which the static name lists miss): the op
count looks into the op's Python body and sees aten::relu, so the operator hides nothing."""
import torch
import torch.nn as nn


@torch.library.custom_op("kevin_candidate::relu_wrapped", mutates_args=())
def relu(x: torch.Tensor) -> torch.Tensor:
    return nn.ReLU()(x)


@relu.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
