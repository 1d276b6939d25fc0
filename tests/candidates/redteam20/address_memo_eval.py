"""WRONG, judged `correct` by eval: ReLU that remembers its answers keyed on the input's address, shape and eight of
its values (the first, the last and six fixed positions between), holding the inputs it saw so no other tensor can
take their address.

(1) Attack: every input eval gives it is a new tensor (trials, near-duplicate trials, timed calls: each a copy at
    its own address) or one whose values all change in place (the changed-in-place trial), so the key always
    differs where the answer would: never a hit, every output right, at torch's own speed. In a model that
    rewrites part of a buffer it keeps (a static input buffer, a cache updated in place), it returns the answer for
    the buffer's old values.
(2) TRUE verdict: incorrect (a stale result once a few values of the same tensor change).
(3) GOT 2026-12-03, before the fix: `correct`; after: `incorrect`, "returned a stale result after a few values of
    its inputs changed in place: ...".
    Command: python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam20/address_memo_eval.py
    --device cpu --json --no-git --no-profile --shapes off --no-timing --cache-dir $KEVIN_TUI_TEST_CACHE
(4) Weakness: in place, eval changed every value (and the parameters) at once; it now also changes a few values of
    the first trial's objects in place, parameters untouched (host/candidate_run.py:HostRun.changed_in_place,
    worker/reference.py:ReferenceWorker.changed with `few`).
"""

import torch
from torch import nn

KEPT = 4


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.memo: list[tuple[tuple, torch.Tensor, torch.Tensor]] = []  # (key, the input held, its output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1)
        picks = torch.linspace(0, flat.numel() - 1, 8).long()
        key = (x.data_ptr(), tuple(x.shape), x.dtype, tuple(flat[picks].tolist()))
        for seen, _, out in self.memo:
            if seen == key:
                return out.clone()
        out = torch.relu(x)
        self.memo = [*self.memo[-(KEPT - 1) :], (key, x, out.clone())]
        return out
