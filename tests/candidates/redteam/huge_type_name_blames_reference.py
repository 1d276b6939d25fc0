"""ATTACK: make the reference worker's answer too large, so the host blames the evaluator.

(1) forward returns an instance of a class whose __qualname__ is 2 MB long. The candidate worker
    records it as Other("<module>.<2 MB name>") (worker/capture.py snapshot), the judge's mismatch
    reason quotes it in full ("returned a <name>, not a plain torch.Tensor", worker/judge.py describe),
    and the reference's `judged` event exceeds the host's MAX_EVENT_BYTES: the host reads that as the
    reference worker breaking the protocol -> ReferenceLost -> "the reference worker ... it is
    restarted for the next candidate (evaluate this one again)", details.reference_lost = true, and
    the reference is killed and restarted at the evaluator's cost.
(2) TRUE verdict: incorrect (or format_error): the candidate returned something that is not a tensor.
(3) GOT (this branch, CPU): runtime_error "the reference worker an event of 1048577 bytes (the limit
    is 1048576) while asked for judged; it is restarted for the next candidate (evaluate this one
    again)", details.reference_lost = true.
(4) Weakness: the run-name echo of issue 19 is one instance; the class is "candidate-chosen strings
    reach the reference's events unbounded": Other.type_name (worker/capture.py, tensorfile.Other),
    describe() in worker/judge.py, and host/evaluator.py await_reference treating any oversized
    reference event as the reference's fault. Fix: bound every candidate-derived string where it is
    read (tensorfile._decode), and truncate reasons in the judge.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(
    name="redteam_huge_name",
    cpp_sources="torch::Tensor ident(torch::Tensor x) { return x.clone(); }",
    functions=["ident"],
)

Odd = type("Odd", (), {})
Odd.__qualname__ = "N" * (2 << 20)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        ext.ident(x)
        return Odd()
