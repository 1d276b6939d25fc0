"""Attack: the next timed call's inputs drawn on a spare core while this call computes.

Every timed call draws a fresh sample inside its round, and the host charges each side its round time
less the reference's own loop overhead (drawing included). The candidate patches the worker's loop in its
own process: while a call computes, a thread already draws the next call's sample (the round's seed is
known, and on the CPU the worker has idle cores: the reference worker is idle while the candidate is
timed), and every call reports 0 ms. The worker's tripwire compares its functions' identities, so the
functions keep theirs and only their code is swapped. The round then lasts about as long as the drawing alone, the same as
the reference's overhead: the kernel's time disappears from the host's figure. The inputs are exactly
the honest ones, so the judge passes. The host now charges a candidate's round at least the CPU time its
processes used, spread over the threads it was given (`Round.charged_ms`; the unit test in
test_trust_schedule.py). On this loaded 2-core machine there was no spare core to draw on: level1/19 gave
`correct` 0.84x (interval 0.46-6.58x) before that charge and 1.26x (0.49-2.30x) after, headline 1.0 both
times; not asserted (a timing)."""

from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn

from kevin_tui.evaluator.worker import inputs, timing_loop

DRAWER = ThreadPoolExecutor(1)
AHEAD: dict = {}


def drawn(self, seed, call):
    return inputs.draw_on(self.get_inputs, inputs.call_seed(seed, call), self.device)


def args_drawn_ahead(self, seed, call):
    job = AHEAD.pop((id(self), seed, call), None)
    value = job.result() if job is not None else drawn(self, seed, call)
    AHEAD[(id(self), seed, call + 1)] = DRAWER.submit(drawn, self, seed, call + 1)
    return value


def call_reported_free(self, fn, args, samples, synced):
    out = fn(args)
    samples.append(0.0)
    return out


vars(inputs).update({"AHEAD": AHEAD, "DRAWER": DRAWER, "drawn": drawn})
inputs.TimedInputs.args.__code__ = args_drawn_ahead.__code__
timing_loop.Timer._call.__code__ = call_reported_free.__code__


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
