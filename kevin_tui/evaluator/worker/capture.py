"""Taking a candidate's output the moment forward returns, without letting it run more code.

The copy is made with torch-function and dispatch modes switched off, and only exact
`torch.Tensor`, `tuple` and `list` objects are looked into: anything else (a subclass, a lazy proxy,
an object with a clever `__reduce_ex__`) is recorded by its type name and fails the judge, which
compares the exact structure with the reference's. The candidate process can still tamper with all
of this — the judge in the reference worker is what decides — but an honest kernel's output is frozen
before the next call can overwrite it.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from kevin_tui.evaluator.worker.tensorfile import Other


@contextlib.contextmanager
def no_modes():
    with torch._C.DisableTorchFunction(), _disable_current_modes():
        yield


def snapshot(value: Any) -> Any:
    """A real copy of `value`, structure preserved; non-plain objects become their type name."""
    kind = type(value)
    if kind is torch.Tensor:
        return value.detach().clone()
    if kind in (tuple, list):
        return kind(snapshot(v) for v in value)
    if kind in (int, float, bool, str) or value is None:
        return value
    return Other(f"{kind.__module__}.{kind.__qualname__}")


def _storages(values: list[Any]) -> list[tuple[int, int]]:
    spans = []
    for value in values:
        if type(value) is torch.Tensor and value.numel():
            storage = value.untyped_storage()
            spans.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
        else:
            spans.append((0, 0))
    return spans


def leaves(value: Any) -> list[Any]:
    if type(value) in (tuple, list):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def _sharing(output: Any, inputs: list[Any], parameters: list[Any]) -> list[tuple[int, str]]:
    """(index, what) of each output leaf that shares memory with an input or a parameter/buffer of the model."""
    found = []
    named = [(f"input {i}", span) for i, span in enumerate(_storages(inputs))]
    named += [("a parameter or buffer", span) for span in _storages(parameters)]
    for index, (start, end) in enumerate(_storages(leaves(output))):
        for name, (other_start, other_end) in named:
            if start < other_end and other_start < end:
                found.append((index, name))
                break
    return found


def aliases(output: Any, inputs: list[Any], parameters: list[Any]) -> list[str]:
    """Which output tensors share memory with an input or a parameter/buffer of the model."""
    return [f"output {index} shares memory with {name}" for index, name in _sharing(output, inputs, parameters)]


def written_bytes(output: Any, inputs: list[Any], parameters: list[Any]) -> int:
    """The least memory a kernel returning `output` must write: none for a tensor that shares memory with an input
    or a parameter (a view: a kernel may return the same view), each distinct element once for the rest (an expanded
    tensor's stride-0 dimensions hold one value). The speed-of-light floor (host/speed_of_light.py): the output's
    full size rejected on CUDA an honest flatten, a view returned in microseconds (tests/candidates/redteam28/)."""
    shared = {index for index, _ in _sharing(output, inputs, parameters)}
    by_storage: dict[int, int] = {}  # outputs sharing memory with each other (one tensor returned twice): the most
    for index, leaf in enumerate(leaves(output)):  # any of them needs, a floor never above what must be written
        if type(leaf) is torch.Tensor and index not in shared and leaf.numel():
            distinct = 1
            for size, stride in zip(leaf.shape, leaf.stride(), strict=True):
                distinct *= size if stride else 1
            key = leaf.untyped_storage().data_ptr()
            by_storage[key] = max(by_storage.get(key, 0), distinct * leaf.element_size())
    return sum(by_storage.values())


def model_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    return [*model.parameters(), *model.buffers()]
