"""Attack, one wrong answer per timing round: the matmul is right everywhere except the last call of each
main timing round (found by walking the stack up to the timing loop's frame, which names the call and the
round's length), where it returns zeros: a 1/N saving that no correctness trial sees. True verdict:
`incorrect`. When three calls a round were judged, it survived ten rounds of 200 calls with probability
(197/200)^10 = 0.86 and was `correct`; every timed output is judged now."""

import sys

import torch
import torch.nn as nn


def _last_timed_call() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "round" and code.co_filename.endswith("timing_loop.py"):
            local = frame.f_locals
            return not local.get("control") and local.get("index") == local.get("calls", 0) - 1
        frame = frame.f_back
    return False


class ModelNew(nn.Module):
    def forward(self, a, b):
        if _last_timed_call():
            return torch.zeros(a.shape[0], b.shape[1])
        return torch.matmul(a, b)
