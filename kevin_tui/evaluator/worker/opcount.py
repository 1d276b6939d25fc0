"""Counting the PyTorch compute ops a forward call dispatches: evidence of what a kernel really does.

"3 aten::mm calls in forward" next to "custom kernel" says the kernel is a PyTorch fallback. It is
evidence, not a check: the candidate runs in this process and could hide from it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

# Ops that only allocate, view or copy: not the work a kernel should replace.
NOT_COMPUTE = (
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "view", "reshape", "_reshape_alias", "as_strided", "t", "transpose", "permute", "expand", "contiguous",
    "clone", "copy_", "_to_copy", "to", "detach", "alias", "slice", "select", "unsqueeze", "squeeze",
    "lift_fresh", "resize_", "set_", "fill_", "zero_", "unbind", "split", "chunk", "narrow", "flatten",
    "_unsafe_view", "new_empty", "new_zeros", "new_full", "new_empty_strided", "stride", "size", "item",
    "_local_scalar_dense", "is_same_size", "result_type", "arange",
)  # fmt: skip


# PyTorch's own operators. A torch.library custom op (a kernel registered as an operator) is not one: it was
# counted as `aten::<its name>` before. What a Python custom op calls inside it is not seen here (the static
# checks read its source).
TORCH_NAMESPACES = ("aten", "prims")


class OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        torchs = getattr(func, "namespace", "aten") in TORCH_NAMESPACES  # not a custom op (the candidate's own)
        if torchs and name.removesuffix("_") not in NOT_COMPUTE and name not in NOT_COMPUTE:
            self.counts[f"aten::{name}"] += 1
        return func(*args, **(kwargs or {}))


def count_ops(call) -> tuple[Any, dict[str, int]]:
    """Run `call()` and return its result with the compute ops it dispatched."""
    counter = OpCounter()
    with counter:
        result = call()
    return result, dict(counter.counts)
