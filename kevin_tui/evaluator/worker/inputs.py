"""Inputs a candidate cannot predict or memoise, drawn with the problem's own `get_inputs()`.

Correctness trials use fresh inputs from a secret seed, plus near-duplicates: an earlier trial's
inputs with a few elements taken from another sample, so a cache keyed on part of the input returns
a stale answer and gives itself away. Positions that never vary between samples (the zeros of a
triangular matrix) are left alone, and a symmetric matrix is changed symmetrically, so an honest
kernel that relies on the problem's structure still sees valid inputs.

Timed calls use a pool of such near-duplicates, and before every call a few elements of the pool
entry change again: no two calls see the same input, at the same address or not, yet producing
them costs one indexed write (the positions and values are drawn once, when the pool is made). The
reference and the candidate replay the same sequence from the same seed, so the reference knows
the exact input of any timed call it is asked to judge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kevin_tui.evaluator.worker.common import seeded

NEAR_DUPLICATE_FRACTION = 0.002
MAX_POSITIONS = 64
POOL_BYTES = 256 << 20


def _varying(base: Any, fresh: Any) -> Any | None:
    """Flat indices where two samples differ, mirrored for a symmetric square matrix; None if none."""
    import torch

    if not (isinstance(base, torch.Tensor) and isinstance(fresh, torch.Tensor)) or base.shape != fresh.shape:
        return None
    if base.numel() == 0 or base.dtype.is_complex:
        return None
    index = (base != fresh).reshape(-1).nonzero().reshape(-1)
    return index if index.numel() else None


def _is_symmetric(*tensors: Any) -> bool:
    import torch

    return all(t.dim() == 2 and t.shape[0] == t.shape[1] and torch.equal(t, t.T) for t in tensors)


class Mixer:
    """Swaps a few varying positions of one tensor between two samples, reproducibly from a generator.

    The samples are given on the CPU; `device` is where the tensors it changes live."""

    def __init__(self, base: Any, fresh: Any, device: str = "cpu") -> None:
        self.index = _varying(base, fresh)
        if self.index is None:
            return
        self.side = base.shape[0] if _is_symmetric(base, fresh) else None
        self.count = min(MAX_POSITIONS, max(1, int(self.index.numel() * NEAR_DUPLICATE_FRACTION)))
        self.base = base.reshape(-1).to(device)
        self.fresh = fresh.reshape(-1).to(device)

    def positions(self, generator: Any) -> Any:
        import torch

        assert self.index is not None, "positions are picked only where the samples differ"
        picks = self.index[torch.randint(0, self.index.numel(), (self.count,), generator=generator)]
        if self.side is not None:
            rows, cols = picks // self.side, picks % self.side
            picks = torch.cat([picks, cols * self.side + rows])
        return picks

    def mix_into(self, target: Any, generator: Any) -> None:
        """Toggle the picked positions of `target` between the two samples' values."""
        import torch

        if self.index is None:
            return
        where = self.positions(generator).to(self.base.device)
        flat = target.view(-1)
        base, fresh = self.base[where], self.fresh[where]
        flat[where] = torch.where(flat[where] == base, fresh, base)


def _mixers(base: list[Any], fresh: list[Any], device: str = "cpu") -> list[Mixer | None]:
    import torch

    return [Mixer(b, f, device) if isinstance(b, torch.Tensor) else None for b, f in zip(base, fresh, strict=True)]


def _generator(seed: int) -> Any:
    import torch

    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def near_duplicate(base: list[Any], fresh: list[Any], seed: int) -> list[Any] | None:
    """`base` with a few varying elements taken from `fresh`; None when no input varies at all."""
    import torch

    generator = _generator(seed)
    mixers = _mixers(base, fresh)
    if all(m is None or m.index is None for m in mixers):
        return None
    out = [b.clone() if isinstance(b, torch.Tensor) else b for b in base]
    for value, mixer in zip(out, mixers, strict=True):
        if mixer is not None:
            mixer.mix_into(value, generator)
    return out


def sample(get_inputs: Callable[[], Any], seed: int) -> list[Any]:
    inputs = seeded(seed, get_inputs)
    if not isinstance(inputs, list | tuple):
        raise TypeError(f"get_inputs() returned a {type(inputs).__name__}, not a list")
    return list(inputs)


def trial_inputs(get_inputs: Callable[[], Any], seed: int, fresh: int, duplicates: int) -> list[list[Any]]:
    """`fresh` independent samples, then up to `duplicates` near-copies of the first ones."""
    trials = [sample(get_inputs, seed + 1 + t) for t in range(fresh)]
    if fresh >= 2:
        for d in range(min(duplicates, fresh - 1)):
            copy = near_duplicate(trials[d], trials[d + 1], seed + 1000 + d)
            if copy is not None:
                trials.append(copy)
    return trials


def _nbytes(values: list[Any]) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


CHANGE_SCHEDULE = 512  # distinct per-call changes drawn up front, used in turn


@dataclass
class Change:
    """Per-call writes into one input: positions[c] get values[c] (the other sample's values, in turn)."""

    positions: Any
    values: Any


def _changes(mixer: Mixer, seed: int) -> Change:
    import torch

    generator = _generator(seed)
    positions = torch.stack([mixer.positions(generator) for _ in range(CHANGE_SCHEDULE)]).to(mixer.base.device)
    flip = (torch.arange(CHANGE_SCHEDULE, device=positions.device) // 2 % 2).bool().unsqueeze(1)
    values = torch.where(flip, mixer.base[positions], mixer.fresh[positions])
    return Change(positions, values)


@dataclass
class Pool:
    """Timed-call inputs: entries on the device, changed a little before each call, the same way on both sides."""

    entries: list[list[Any]]
    changes: list[Change | None]
    calls: int = 0

    @classmethod
    def build(cls, get_inputs: Callable[[], Any], seed: int, device: str, max_bytes: int = POOL_BYTES) -> Pool:
        from kevin_tui.evaluator.worker.common import to_device

        base, fresh = sample(get_inputs, seed), sample(get_inputs, seed + 1)
        size = max(2, min(8, max_bytes // max(1, _nbytes(base))))
        entries = [to_device(near_duplicate(base, fresh, seed + 2 + e) or list(base), device) for e in range(size)]
        mixers = _mixers(base, fresh, device)
        changes = [_changes(m, seed + 100 + i) if m is not None and m.index is not None else None
                   for i, m in enumerate(mixers)]  # fmt: skip
        return cls(entries, changes)

    def next_args(self) -> list[Any]:
        """The inputs of the next call: the next pool entry, with a few elements rewritten in place."""
        entry = self.entries[self.calls % len(self.entries)]
        slot = self.calls % CHANGE_SCHEDULE
        for value, change in zip(entry, self.changes, strict=True):
            if change is not None:
                value.view(-1)[change.positions[slot]] = change.values[slot]
        self.calls += 1
        return entry
