"""A ReLU for level1/19 that, at import, writes one event of its own to the host: deeply nested JSON with an escaped lone surrogate.

Attack: `protocol.parse_event` catches ValueError/RecursionError around `json.loads`, but an event whose bytes hold
`\\ud800` then goes through `whole_text`, a recursive Python walk (two frames a level: the list comprehension is a
frame of its own in 3.11), before the schema is checked. JSON nested ~700 deep parses (the C scanner's limit is the
recursion limit) and then overflows `whole_text`: the RecursionError escapes `parse_event` and kills the host's
reader thread (`WorkerProcess._read`) with a traceback on the host's stderr (a TUI's screen); nothing more is ever
queued, so the host waits out the phase's whole deadline.
True verdict: rejected ("protocol violation: ..."), as for any malformed event. Verdict got (2026-12-02): `timeout`
"no result within 60 s in the load phase" after the whole deadline (73 s in all), and a RecursionError traceback from
`whole_text` on the host's stderr; with the fix, `rejected` "protocol violation: an event nested more than 32 deep" in 12 s.
Command:
  python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam15/nested_surrogate_event_kills_reader.py \
      --device cpu --json --no-git --no-profile --shapes off --sandbox unshare --timeout 60
"""

import os
import sys

import torch
import torch.nn as nn

_DEPTH = 700
_line = (
    b'{"event":"crash","message":"\\ud800","traceback":"' + b"x" + b'","z":' + b"[" * _DEPTH + b"]" * _DEPTH + b"}\n"
)
os.write(int(sys.argv[3]), _line)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
