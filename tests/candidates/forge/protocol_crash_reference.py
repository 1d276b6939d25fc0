"""Forge (class 1, protocol): make the reference worker die, so the NEXT candidate is misjudged.

What it does: at import it writes a `checked` event whose `outputs_path` is a file that is not a
torch archive. The host forwards that path to the long-lived reference worker, whose
torch.load(weights_only=True) raises; the reference worker reports `crash` and exits. The host
turns that into `runtime_error` for us, but only drops its handle to the reference worker when an
answer times out or the pipe is gone, not when it answers with the wrong event: the next candidate
of the same Evaluator is then judged against a dead reference and gets `runtime_error` ("the
reference worker exited...") although it is honest. `optimize` re-evaluates a candidate once when
its verdict says reference_lost, which hides this there; `replay --reeval` and other Evaluator
users do not. (A FIFO as `outputs_path` instead would stall the judge until reference_timeout,
600 s by default, whatever the candidate's own --timeout; not run here.)

Defeats: the host passing a worker-chosen path to the judge; stale reference handle after `crash`.
Correct verdict: `runtime_error` (protocol violation) for this one; the next candidate unaffected.
Today: this one `runtime_error`; the next honest candidate `runtime_error` as well (see
run_all.sh, which evaluates relu_cpp.py after it in one Evaluator).
"""
import contextlib
import os
from pathlib import Path

import torch
import torch.nn as nn

_bogus = Path.cwd() / "outputs_bogus.pt"
_bogus.write_bytes(b"not a torch archive\n")
for _entry in os.listdir("/proc/self/fd"):
    with contextlib.suppress(OSError):
        _flags = int(Path(f"/proc/self/fdinfo/{_entry}").read_text().split("flags:")[1].split()[0], 8)
        if os.readlink(f"/proc/self/fd/{_entry}").startswith("pipe:") and _flags & os.O_ACCMODE == os.O_WRONLY:
            os.write(int(_entry), ('{"event": "checked", "outputs_path": "%s", "checks": []}\n' % _bogus).encode())
            break


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
