"""Counting the PyTorch compute ops a forward call dispatches: evidence of what a kernel really does.

"3 aten::mm calls in forward" next to "custom kernel" says the kernel is a PyTorch fallback. It is
evidence, not a check: the candidate runs in this process and could hide from it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

from kevin_tui.evaluator.operators import NOT_COMPUTE

# PyTorch's own operators. A torch.library custom op (a kernel registered as an operator) is not one: what
# counts is what its Python body dispatches, which runs under the counter (an honest C++ kernel's body
# dispatches no compute; a custom op wrapping torch.relu is seen as aten::relu). A custom op defined in C++
# (TORCH_LIBRARY) is not looked into.
TORCH_NAMESPACES = ("aten", "prims")


def python_body(func: Any) -> Callable[..., Any] | None:
    """The Python function a torch.library.custom_op was made from (None for an operator defined in C++)."""
    try:
        from torch._library.custom_ops import OPDEFS

        return getattr(OPDEFS.get(f"{func.namespace}::{func._opname}"), "_init_fn", None)
    except (ImportError, AttributeError):
        return None


class OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No torch._disable_dynamo wrap of __torch_dispatch__: its first call would import torch._dynamo (2 s),
        which a worker whose evaluation compiles nothing does not have, in the step before the verdict."""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "namespace", "aten") not in TORCH_NAMESPACES:
            if (body := python_body(func)) is not None:
                with self:
                    return body(*args, **kwargs)
            return func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if name.removesuffix("_") not in NOT_COMPUTE and name not in NOT_COMPUTE:
            self.counts[f"aten::{name}"] += 1
        return func(*args, **kwargs)


def count_ops(call) -> tuple[Any, dict[str, int]]:
    """Run `call()` and return its result with the compute ops it dispatched."""
    counter = OpCounter()
    with counter:
        result = call()
    return result, dict(counter.counts)
