"""Attack (redteam4), precomputed elementwise answers: every timed input was a 0/1 mix of a few pool entries
drawn at `pool` time, in the candidate's process. For an elementwise function f, f(mix(a, b)) = mix(f(a), f(b)),
so a candidate that reaches the entries computes f on them once and answers each timed call by selecting.
The first form rebound the problem's `get_inputs` to hand the pool its answers (level1/26 GELU on the loaded
2-core CPU: `correct`, measured 1.13x, interval 0.62-1.62x, headline 1.0); that path closed when the worker
began to hold `get_inputs` from before the import, but the entries stayed in reach of introspection.

This form reaches them through the stack: a timed call's forward walks up to the timing loop's frame, takes
every tensor the timer holds (its pool's entries), computes ReLU on each once and answers every call by
picking, element by element, the precomputed answer whose entry has that value there. Its witness: where no
held value matches, the answer is 0, so a timed input that is not made of values held before its round fails
the judge. Before the fix (level1/19 ReLU, 5 timed calls): `correct`, every timed input being such a mix (this
generic selection over all eight entries is slow, 0.00x; one that reads the frame's plan picks the two entries
and their mask). Now every timed call draws a fresh sample inside its round and the timer holds no input
values: `incorrect` ("constant output 0"). The trials get an honest ReLU."""

import sys

import torch
import torch.nn as nn

ANSWERS: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # a held tensor's id: (that tensor, its answer)


def _timer():
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "round" and frame.f_code.co_filename.endswith("timing_loop.py"):
            return frame.f_locals.get("self")
        frame = frame.f_back
    return None


def _held(value, seen: set[int]) -> list[torch.Tensor]:
    """Every tensor reachable through the attributes and containers of `value`."""
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    elif hasattr(value, "__dict__") and not callable(value):
        value = list(vars(value).values())
    if isinstance(value, list | tuple):
        return [t for v in value for t in _held(v, seen)]
    return []


class ModelNew(nn.Module):
    def forward(self, x):
        timer = _timer()
        if timer is None:
            return torch.relu(x)
        if not ANSWERS:
            for held in _held(timer, set()):
                if held.shape == x.shape and held.dtype == x.dtype:
                    ANSWERS[id(held)] = (held, torch.relu(held))
        out = torch.zeros_like(x)
        for held, answer in ANSWERS.values():
            out = torch.where(x == held, answer, out)
        return out
