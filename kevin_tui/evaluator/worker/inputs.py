"""Inputs a candidate cannot predict or memoise, drawn with the problem's own `get_inputs()`.

Correctness trials use fresh inputs from a secret seed, plus near-duplicates: an earlier trial's
inputs with a few elements taken from another sample, so a cache keyed on part of the input returns
a stale answer and gives itself away. Positions that never vary between samples (the zeros of a
triangular matrix) are left alone, and a symmetric matrix is changed symmetrically, so an honest
kernel that relies on the problem's structure still sees valid inputs.

Timed calls use `TimedInputs` (below): a fresh sample for every call, from a seed that the host
sends only when the round starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kevin_tui.evaluator.worker.common import seeded

NEAR_DUPLICATE_FRACTION = 0.002
MAX_POSITIONS = 64


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
    """Swaps a few varying positions of one tensor between two samples, reproducibly from a generator."""

    def __init__(self, base: Any, fresh: Any) -> None:
        self.index = _varying(base, fresh)
        if self.index is None:
            return
        self.side = base.shape[0] if _is_symmetric(base, fresh) else None
        self.count = min(MAX_POSITIONS, max(1, int(self.index.numel() * NEAR_DUPLICATE_FRACTION)))
        self.base = base.reshape(-1)
        self.fresh = fresh.reshape(-1)

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
        where = self.positions(generator)
        flat = target.view(-1)
        base, fresh = self.base[where], self.fresh[where]
        flat[where] = torch.where(flat[where] == base, fresh, base)


def _mixers(base: list[Any], fresh: list[Any]) -> list[Mixer | None]:
    import torch

    return [Mixer(b, f) if isinstance(b, torch.Tensor) else None for b, f in zip(base, fresh, strict=True)]


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


def sample(get_inputs: Callable[[], Any], seed: int, every: bool = True) -> list[Any]:
    """One draw of the problem's inputs from `seed` (`every`: as `common.seeded`)."""
    inputs = seeded(seed, get_inputs, every)
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


def _other_generators() -> tuple[Any, ...]:
    """The state of the generators besides torch's that a problem may draw from: Python's and numpy's global."""
    import random
    import sys

    numpy = sys.modules.get("numpy")
    if numpy is None:
        return (random.getstate(),)
    kind, key, position, has_gauss, gauss = numpy.random.get_state()
    return random.getstate(), kind, key.tobytes(), position, has_gauss, gauss


def call_seed(seed: int, call: int) -> int:
    """The seed of one timed call's sample, from its round's seed."""
    return (seed + call * 7919) % (1 << 62)


def draw_on(get_inputs: Callable[[], Any], seed: int, device: str, every: bool = True) -> list[Any]:
    """One sample made on `device`: on CUDA the problem's factories run there (`torch.randn` on the GPU, no
    copy), and whatever it still makes on the CPU is moved. Unverified on CUDA in this repository's CI."""
    if device == "cpu":
        return sample(get_inputs, seed, every)
    import torch

    from kevin_tui.evaluator.worker.common import to_device

    with torch.device(device):
        return to_device(sample(get_inputs, seed, every), device)


@dataclass
class TimedInputs:
    """Timed-call inputs that nobody has seen before the round that uses them begins.

    Every call gets its own independent sample of the problem's `get_inputs()`, drawn from the round's
    seed (which the host sends only when the round starts) inside the round the host times, the same way
    for both sides. Nothing is drawn ahead, so no value of any timed input exists before its round: an
    answer computed earlier (for an elementwise function, on a few known entries, then selected per
    call) or an incremental update of an earlier answer has nothing to start from. Each input is exactly
    what the problem makes (sorted ids stay sorted, a symmetric matrix symmetric). The reference draws
    the same inputs from the same seeds on the same device, so it knows the exact input of any call it
    judges."""

    get_inputs: Callable[[], Any]
    device: str
    every_generator: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        """Whether each call must seed Python's and numpy's generators too: only where a draw moves their state
        (the problem draws from them), since the seeding is ~25 us of loop work a call. Decided the same way in
        both workers, before the first round, from one draw; a candidate's worker that decides otherwise draws
        other inputs and fails the judge."""
        before = _other_generators()
        draw_on(self.get_inputs, 0, self.device, every=False)
        self.every_generator = _other_generators() != before

    def args(self, seed: int, call: int) -> list[Any]:
        return draw_on(self.get_inputs, call_seed(seed, call), self.device, self.every_generator)
