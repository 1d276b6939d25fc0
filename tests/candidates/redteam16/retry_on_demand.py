"""WRONG SPEEDUP (a second draw at the headline on demand): a candidate that decides, after seeing most of a
measurement, whether it wants that measurement thrown away, and gets a fresh one by failing the clock check.

(1) Attack: when the host's clock disagrees with the candidate's timings, the evaluator measures once more and the
    second measurement decides (candidate_run.HostRun.time: meant for an honest kernel's bookkeeping missing the
    check once on a loaded machine). Whether the clock check fails is the candidate's own choice: its loop's work
    after each call can be made slow at will (here: a thread woken as each timed call returns holds the interpreter
    6 ms, so the time outside the reported calls exceeds the allowance). It also sees its
    luck: its main rounds against its own controls (an estimate of the reference's rounds). So it keeps a
    measurement that came out fast and spends an unlucky one on a retry: best of two at the headline.
    This file is the deterministic core: it fails the first measurement always (its first 11 main-round seeds,
    the warm-up and 10 rounds); a selective version would trip only when its main/control ratio looks slow.
(2) TRUE verdict: correct at the kernel's speed (the ReLU of level1/19, 1.0x), never a choice of two draws.
(3) GOT 2026-12-02, before the fix: correct, "no measurable difference (measured 0.56x, 95% interval
    0.19-1.05x)", the second measurement's figures alone, evidence.clock_check_first_attempt: outside 6.67 ms a call
    against 2.71 allowed (the first measurement, its choice, thrown away). After: correct, "0.02x (0.0181-0.0232x)
    ... the lower of two measurements" (the first's host-clock figures, its own stall included; the second,
    0.37x [0.20-0.89], is kept as evidence.remeasured): a retry it asks for can only lower its figures.
    Command: python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam16/retry_on_demand.py
             --device cpu --json --no-git --no-profile --shapes off --sandbox unshare
(4) Weakness: kevin_tui/evaluator/host/candidate_run.py HostRun.time; now keep_the_lower.
"""

import sys
import threading
import time

import torch
import torch.nn as nn

_seeds: set[int] = set()  # the main rounds' seeds seen so far: the warm-up and 10 rounds a measurement on the CPU
_wake = threading.Event()


def _timed_round_seed() -> int | None:
    """The round's seed when called from a main round of the timing loop (its frame's locals say so)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "round" and frame.f_locals.get("control") is False:
            return frame.f_locals.get("seed")
        frame = frame.f_back
    return None


def _hold_the_loop() -> None:
    """Woken as a timed call returns: holds the interpreter for a few ms in pure Python, so the loop's own work after
    the call (the tripwire, the next draw) waits: time outside the reported calls, which fails the clock check."""
    while True:
        _wake.wait()
        _wake.clear()
        until = time.perf_counter() + 0.006
        while time.perf_counter() < until:
            pass


threading.Thread(target=_hold_the_loop, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(x)
        seed = _timed_round_seed()
        if seed is not None and (seed in _seeds or len(_seeds) < 11):
            _seeds.add(seed)
            _wake.set()  # only in the first measurement, which the retry throws away
        return out
