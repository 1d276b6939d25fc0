"""Inputs a candidate cannot predict or memoise, drawn with the problem's own `get_inputs()`.

Correctness trials use fresh inputs from a secret seed, plus near-duplicates: an earlier trial's
inputs with a few elements taken from another sample, so a cache keyed on part of the input returns
a stale answer and gives itself away. Positions that never vary between samples (the zeros of a
triangular matrix) are left alone, and a symmetric matrix is changed symmetrically, so an honest
kernel that relies on the problem's structure still sees valid inputs.

Timed calls use a `Pool` (below): half of every input is new in every call, from a seed that
the host sends only when the round starts.
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


def _is_hermitian(value: Any) -> bool:
    import torch

    return value.is_complex() and value.dim() == 2 and value.shape[0] == value.shape[1] and torch.equal(value, value.mH)


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


MIX_SHARE = 0.5  # of every varying element, the share taken from the other pool entry in each call
SYMMETRIC_MASKS = 8


@dataclass
class Mask:
    """Where one input takes its values from the second entry: random 0/1 weights twice the input's size,
    viewed at a per-call offset (or, for a symmetric matrix, one of a few symmetric masks). Floating
    inputs mix by `lerp` with 0/1 weights (exact, and several times faster than `where`)."""

    bits: Any
    symmetric: bool

    def pick(self, shape: Any, offset: int) -> Any:
        if self.symmetric:
            return self.bits[offset % len(self.bits)]
        count = self.bits.numel() // 2
        return self.bits[offset % count : offset % count + count].view(shape)

    def mix(self, a: Any, b: Any, offset: int) -> Any:
        import torch

        weights = self.pick(a.shape, offset)
        if a.is_complex():  # each element whole from one sample, as for real inputs (a Hermitian matrix stays so)
            mixed = torch.lerp(torch.view_as_real(a), torch.view_as_real(b), weights.unsqueeze(-1))
            return torch.view_as_complex(mixed)
        return torch.lerp(a, b, weights) if a.is_floating_point() else torch.where(weights, b, a)


def _mask(value: Any, generator: Any, device: str) -> Mask | None:
    import torch

    if not isinstance(value, torch.Tensor) or value.numel() == 0:
        return None
    kind = value.real.dtype if value.is_complex() else value.dtype if value.is_floating_point() else torch.bool
    if _is_symmetric(value) or _is_hermitian(value):
        side = value.shape[0]
        masks = [torch.rand(side, side, generator=generator) < MIX_SHARE for _ in range(SYMMETRIC_MASKS)]
        return Mask([(m.triu() | m.triu().T).to(device, kind) for m in masks], True)
    return Mask((torch.rand(2 * value.numel(), generator=generator) < MIX_SHARE).to(device, kind), False)


@dataclass
class Pool:
    """Timed-call inputs that nobody can know before the round that uses them begins.

    The pool holds a few independent samples (drawn from a pool seed at `pool` time). Each call of a
    round takes two different entries and a random half of every varying element from the second, by a
    mask at an offset drawn from the round's seed, which the host sends only when the round starts:
    every call's input is new in about half its elements, so neither a precomputed answer nor an
    incremental update of an earlier one helps. Positions that never vary between samples are the same
    in every entry and stay as they are; a symmetric matrix gets a symmetric mask. With
    `near_duplicates` off (a problem whose inputs must be exactly what `get_inputs()` makes), every
    call gets a fresh sample drawn from the round's seed instead. The reference and the candidate build
    the same inputs from the same seeds, so the reference knows the exact input of any call it judges."""

    get_inputs: Callable[[], Any]
    device: str
    entries: list[list[Any]]
    masks: list[Mask | None]
    mixing: bool

    @classmethod
    def build(
        cls, get_inputs: Callable[[], Any], seed: int, device: str, max_bytes: int = POOL_BYTES, mixing: bool = True
    ) -> Pool:
        from kevin_tui.evaluator.worker.common import to_device

        if not mixing:
            return cls(get_inputs, device, [], [], False)
        first = sample(get_inputs, seed)
        size = max(2, min(8, max_bytes // max(1, _nbytes(first))))
        entries = [to_device(first, device)] + [to_device(sample(get_inputs, seed + e), device) for e in range(1, size)]
        generator = _generator(seed + 1000)
        return cls(get_inputs, device, entries, [_mask(v, generator, device) for v in first], True)

    def schedule(self, seed: int, calls: int) -> list[tuple[int, int, int] | None]:
        """(first entry, second entry, mask offset) for each call of a round, from the round's seed."""
        import random

        if not self.mixing:
            return [None] * calls
        rng = random.Random(seed)
        size = len(self.entries)
        plan: list[tuple[int, int, int] | None] = []
        for _ in range(calls):
            first, second = rng.sample(range(size), 2) if size >= 2 else (0, 0)
            plan.append((first, second, rng.randrange(1 << 30)))
        return plan

    def args(self, seed: int, call: int, plan: tuple[int, int, int] | None) -> list[Any]:
        """The inputs of one call: fresh tensors, never an entry itself (what a call does to its inputs
        stays with that call)."""
        import torch

        from kevin_tui.evaluator.worker.common import to_device

        if not self.mixing or plan is None:
            return to_device(sample(self.get_inputs, (seed + call * 7919) % (1 << 62)), self.device)
        first, second, offset = plan
        out = []
        for a, b, mask in zip(self.entries[first], self.entries[second], self.masks, strict=True):
            if mask is not None:
                out.append(mask.mix(a, b, offset))
            else:  # nothing to mix (an empty tensor, a number): still never the entry itself
                out.append(a.clone() if isinstance(a, torch.Tensor) else a)
        return out
