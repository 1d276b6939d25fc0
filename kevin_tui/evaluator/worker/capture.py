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


def any_mode() -> bool:
    """Whether a torch function or dispatch mode is active on this thread (no_modes is needed only then)."""
    return bool(torch._C._is_torch_function_mode_enabled() or torch._C._len_torch_dispatch_stack())


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


def written_bytes(
    output: Any, inputs: list[Any], parameters: list[Any], saved: dict[int, torch.UntypedStorage] | None = None
) -> int:
    """The least memory a kernel returning `output` must write: for a tensor that shares memory with an input or a
    parameter (a view: a kernel may return the same view) only the values the call changed there (`saved`: the
    inputs' storages as they were before it, by address; an in-place result was written), each distinct element
    once for the rest (an expanded tensor's stride-0 dimensions hold one value), outputs sharing memory with each
    other the elements they cover together (one tensor returned twice once, a tensor's chunks all of it), and a
    Python float 8 bytes (none lifted the floor of one launch on CUDA from a problem returning `.item()`). The
    speed-of-light floor (host/speed_of_light.py): the output's full size rejected on CUDA an honest flatten, a view
    returned in microseconds (tests/candidates/redteam28/); counting an in-place result as a view, or chunks as the
    largest one, let a kernel pass below what it must write (tests/candidates/redteam29/)."""
    shared = {index for index, _ in _sharing(output, inputs, parameters)}
    by_storage: dict[int, list[torch.Tensor]] = {}
    in_place = numbers = 0
    for index, leaf in enumerate(leaves(output)):
        if type(leaf) is float:  # a Python float: computed in the call (on CUDA, read back from the device)
            numbers += 8
        if type(leaf) is not torch.Tensor or not leaf.numel():
            continue
        if index not in shared:
            by_storage.setdefault(leaf.untyped_storage().data_ptr(), []).append(leaf)
        elif (before := (saved or {}).get(leaf.untyped_storage().data_ptr())) is not None:
            in_place = max(in_place, _changed_bytes(leaf, before))
    return sum(_covered_bytes(group) for group in by_storage.values()) + in_place + numbers


def _changed_bytes(leaf: torch.Tensor, before: torch.UntypedStorage) -> int:
    """The bytes of `leaf`'s distinct elements whose values differ from those at its place in `before` (its
    storage as it was; NaN alike); none where that cannot be read so."""
    view = _distinct_view(leaf)
    try:
        with torch.no_grad():
            old = torch.empty(0, dtype=leaf.dtype, device=leaf.device).set_(
                before, view.storage_offset(), view.shape, view.stride()
            )
            differs = old != view
            if leaf.is_floating_point() or leaf.is_complex():
                differs &= ~(torch.isnan(old) & torch.isnan(view))
            return int(differs.sum()) * leaf.element_size()
    except RuntimeError:
        return 0


def _distinct_view(leaf: torch.Tensor) -> torch.Tensor:
    """`leaf` with each stride-0 (expanded) dimension cut to one: its distinct elements."""
    return leaf.as_strided([size if stride else 1 for size, stride in zip(leaf.shape, leaf.stride(), strict=True)],
                           leaf.stride(), leaf.storage_offset())  # fmt: skip


def _covered_bytes(group: list[torch.Tensor]) -> int:
    """The bytes of one storage that the output tensors `group` (all on it) cover together; the largest one's
    distinct elements where they cannot be marked (several element sizes, an overlapping layout)."""
    largest = max(_distinct_view(t).numel() * t.element_size() for t in group)
    first = group[0]
    if len(group) == 1 or len({t.element_size() for t in group}) > 1:
        return largest
    if all(t.shape == first.shape and t.stride() == first.stride() and
           t.storage_offset() == first.storage_offset() for t in group):  # fmt: skip
        return largest  # one tensor returned more than once
    size = first.element_size()
    try:
        with torch.no_grad():
            marks = torch.zeros(first.untyped_storage().nbytes() // size, dtype=torch.bool, device=first.device)
            for t in group:
                view = _distinct_view(t)
                marks.as_strided(view.shape, view.stride(), view.storage_offset()).fill_(True)
            return max(int(marks.sum()) * size, largest)
    except RuntimeError:
        return largest


def model_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    return [*model.parameters(), *model.buffers()]
