"""Trust3 attack (protocol): a 1.2 MB run name in its output record. The candidate worker writes each
trial's record; this one rewrites the name of the "after" run, which the reference worker echoed into
its `judged` event (a check named after the run): an event over the 1 MiB limit, so the host took the
*reference* for broken.

Before: `runtime_error` "the reference worker ... (evaluate this one again)", blamed on the evaluator,
and the reference restarted. Correct: the candidate's record is refused where it enters the judge
(`incorrect`, "unusable").
"""
import sys

import torch
import torch.nn as nn

_worker = sys.modules.get("kevin_tui.evaluator.worker.candidate")
if _worker is not None:
    _write = _worker.write_record

    def _long_names(path, outputs, found):
        renamed = {(name + "x" * 1_200_000 if name == "after" else name): value for name, value in outputs.items()}
        _write(path, renamed, found)

    _worker.write_record = _long_names


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
