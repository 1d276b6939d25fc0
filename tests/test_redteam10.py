"""Attacks a tenth red team wrote against the evaluator and `apply --check` (tests/candidates/redteam10/, each
file's docstring says the attack, its true verdict and what it got before the fix)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from kevin_tui.usermodel.check import compare_norm
from kevin_tui.usermodel.training_check import compiled, gradients, loss_weights

# -- apply --check: a compiled model that differs in kind, not in values, is never within compile's own bar --------


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x))


class DetachedWhenCompiled(Block):
    """compiled_cuts_the_graph.py in small: the block's own code, its output detached under torch.compile."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        return out.detach() if torch.compiler.is_compiling() else out


class WiderWhenCompiled(Block):
    """float64 under torch.compile where the model gives float32 (a dtype a compiled model does not expect)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        return out.double() if torch.compiler.is_compiling() else out


def _within(expected, got, at):
    return compare_norm(expected, got, None, None, at)


@pytest.mark.parametrize("kernel", [DetachedWhenCompiled, WiderWhenCompiled])
def test_a_compiled_model_that_cuts_the_graph_or_changes_dtype_fails_apply_check(kernel):
    """training_check.compiled let a compiled run differ from eager by twice compile's own difference, read from
    the comparison's figure; a gradient missing or another dtype reported a figure of 0.0, always within the bar:
    `apply --check` passed (and installed with the kernel's own backward) a kernel under which no gradient reaches
    anything when the model is compiled."""
    torch.manual_seed(0)
    before = Block()
    after = kernel()
    after.load_state_dict(before.state_dict())
    args = [torch.randn(4, 8)]
    with torch.no_grad():
        expected = before(*args)
    weights = loss_weights(expected)
    _, expected_grads = gradients(before, args, weights)
    figures, why = compiled(copy.deepcopy(before), after, args, expected, expected_grads, weights, _within)
    assert why is not None and "compiled:" in why, figures
    assert ("no gradient reaches" in why) if kernel is DetachedWhenCompiled else ("float64" in why)


def test_an_honest_block_still_passes_under_compile():
    torch.manual_seed(0)
    before = Block()
    after = copy.deepcopy(before)
    args = [torch.randn(4, 8)]
    with torch.no_grad():
        expected = before(*args)
    weights = loss_weights(expected)
    _, expected_grads = gradients(before, args, weights)
    _, why = compiled(copy.deepcopy(before), after, args, expected, expected_grads, weights, _within)
    assert why is None, why
