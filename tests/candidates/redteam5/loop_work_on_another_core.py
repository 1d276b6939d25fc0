"""Attack (redteam5): do the timing loop's own work and the kernel's on a second core, outside the
call the worker times (level1/19 ReLU, 1 MB; pure Python, no custom kernel).

The host charges each side its round on the host's clock, less the reference worker's loop overhead
(building every call's input), and the reference runs with one thread. This candidate rebinds the
worker's `Pool.schedule`/`Pool.args` (worker/inputs.py, not watched): when a round starts, two
threads of its own build each call's input and its ReLU in parallel, and the loop's `args()` and
forward only pick them up. The round lasts about half of what the reference's does (two cores instead
of one), so the host time less the reference's overhead is about nothing and the worker's own per-call
time is a lookup. The thread count torch reports never changes, and the threads are idle when a round
ends; the CPU time the host reads (2x the thread allowance) only makes a `more_cores` warning.

Measured before the fix on the loaded 2-core machine (load 7-9, no second core free): `correct`, 1.63x
[0.37-120] and 0.54x [0.31-63], no `more_cores` warning: not shown as a wrong verdict here; on an idle
machine it should read about the loop's share faster. Should be: the CPU time beyond the reference's
thread allowance charged (main now does: `Round.charged_ms`), about 1x or slower. Written against the
pool of mixed entries (`Pool.schedule/args`); main's fresh per-call inputs replaced that pool, so this
file now fails at import (`runtime_error`) - kept for its tuple-assigned patch (a static finding now).
"""

import threading

import torch
import torch.nn as nn
from kevin_tui.evaluator.worker import inputs

_schedule, _args = inputs.Pool.schedule, inputs.Pool.args
_round: list = []  # [seed, results, events] of the round in progress
_picked: list = []  # [input, answer] of the call in progress


def _planned(self, seed, calls):
    plan = _schedule(self, seed, calls)
    results = [None] * calls
    events = [threading.Event() for _ in range(calls)]

    def work(first):
        for call in range(first, calls, 2):
            args = _args(self, seed, call, plan[call])
            results[call] = (args, torch.relu(args[0]))
            events[call].set()

    _round[:] = [seed, results, events]
    for first in (0, 1):
        threading.Thread(target=work, args=(first,), daemon=True).start()
    return plan


def _picked_up(self, seed, call, plan):
    if _round and _round[0] == seed and call < len(_round[1]):
        _round[2][call].wait()
        args, answer = _round[1][call]
        _picked[:] = [args[0], answer]
        return args
    return _args(self, seed, call, plan)


inputs.Pool.schedule, inputs.Pool.args = _planned, _picked_up


class ModelNew(nn.Module):
    def forward(self, x):
        if _picked and x is _picked[0]:
            return _picked.pop()
        return torch.relu(x)
