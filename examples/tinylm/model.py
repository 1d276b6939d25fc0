"""TinyLM: token embedding, a stack of blocks, a final norm and the output projection."""

import torch
from torch import nn

from tinylm.blocks import Block, RMSNorm


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 1000, dim: int = 256, hidden: int = 1024, heads: int = 4, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, hidden, heads) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build_model(layers: int = 2) -> TinyLM:
    """The model as the application builds it: for inference."""
    return TinyLM(layers=layers).eval()
