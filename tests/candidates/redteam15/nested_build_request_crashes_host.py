"""A ReLU for level1/19 that, at import, sends the host a build request of its own whose `functions` mapping holds
a list nested ~970 deep.

Attack: the protocol checks `functions` only as "a list of strings or a mapping", not the mapping's values. The
reader thread decodes the event at a shallow stack (json.loads's limit is the recursion limit), then the host's main
thread, tens of frames deeper, hashes the request for its build key (`builds.BuildBroker.key`: json.dumps) and the
encoder's RecursionError escapes the evaluation.
The window is narrow (deeper than the host's main thread allows, shallower than the reader's): 970 built and passed,
988 crashed the host.
True verdict: rejected (protocol violation: a malformed build request). Verdict got (2026-12-02): none; `eval` exited 1
with "RecursionError: maximum recursion depth exceeded while encoding a JSON object" from `builds.py` `key`
(`candidate_run.build`); in `optimize` or a batch run the turn would be lost. With the fix (every event's nesting
bounded, `protocol.MAX_EVENT_DEPTH`): `rejected` "protocol violation: an event nested more than 32 deep" in 11 s.
Command:
  python3 -m kevin_tui eval kernelbench:level1/19 tests/candidates/redteam15/nested_build_request_crashes_host.py \
      --device cpu --json --no-git --no-profile --shapes off --sandbox unshare --no-timing
"""

import json
import os
import sys

import torch
import torch.nn as nn

_DEPTH = 988
_request = {
    "event": "build_request", "kind": "inline", "name": "relu_nested", "cpp_sources": ["int f() { return 0; }"],
    "cuda_sources": [], "sources": [], "functions": {"f": "@"}, "extra_cflags": [], "extra_cuda_cflags": [],
    "extra_ldflags": [], "extra_include_paths": [], "with_cuda": None, "no_implicit_headers": False,
}  # fmt: skip
_line = json.dumps(_request).replace('"@"', "[" * _DEPTH + "]" * _DEPTH) + "\n"
os.write(int(sys.argv[3]), _line.encode())
_answer = os.read(int(sys.argv[2]), 1 << 16)  # wait for the host's answer (it never comes)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
