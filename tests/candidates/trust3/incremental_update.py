"""Attack (tests/problems/matmul_1024.py): an incremental update of the previous answer.

The timing pool hands out the same few tensors again with at most 64 elements changed per call, at
positions its own change schedule holds (found with gc). This keeps each pool entry's last inputs and
product and updates the product by rank-one corrections for just those elements (exact algebra: a
row of the product per changed element of `a`, a column per changed element of `b`) instead of
multiplying again. Anything else (the trials) gets a full matmul. Today: `correct` at several times
its real speed. Should be: `correct` at its real speed (inputs half new in every call, from a seed
sent only when the round starts: there is no schedule to read and nothing to update).
"""
import gc

import torch
import torch.nn as nn

CACHE: dict = {}
FOUND: list = [None]


def _pool():
    for o in gc.get_objects():
        if type(o).__name__ == "Pool" and hasattr(o, "changes") and hasattr(o, "calls"):
            return o
    return None


def _update(pool, entry, a, b):
    slot = (pool.calls - 1) % len(pool.changes[0].positions)
    a_old, b_old, out = CACHE[id(entry)]
    out = out.clone()
    pa = pool.changes[0].positions[slot].unique()
    i, j = pa // a.shape[1], pa % a.shape[1]
    delta = a[i, j] - a_old[i, j]
    out.index_add_(0, i, delta[:, None] * b_old[j])
    a_old[i, j] = a[i, j]
    pb = pool.changes[1].positions[slot].unique()
    j, k = pb // b.shape[1], pb % b.shape[1]
    delta = b[j, k] - b_old[j, k]
    out.index_add_(1, k, a[:, j] * delta[None, :])
    b_old[j, k] = b[j, k]
    CACHE[id(entry)] = (a_old, b_old, out)
    return out


class ModelNew(nn.Module):
    def forward(self, a, b):
        entry = next((e for e in getattr(FOUND[0], "entries", []) if e[0] is a and e[1] is b), None)
        if entry is None:
            FOUND[0] = _pool()
            entry = next((e for e in getattr(FOUND[0], "entries", []) if e[0] is a and e[1] is b), None)
        pool = FOUND[0]
        if entry is not None and id(entry) in CACHE:
            return _update(pool, entry, a, b)
        out = torch.matmul(a, b)
        if entry is not None:
            CACHE[id(entry)] = (a.clone(), b.clone(), out.clone())
        return out
