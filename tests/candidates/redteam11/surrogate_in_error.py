"""A candidate whose forward raises with a lone surrogate (U+D800) in its message.

Attack: the message crosses the worker's JSON (escaped as \\ud800), comes back to the host as a Python
string no UTF-8 file can hold, and flows into the verdict's message, the session file and the printed
output. TRUE verdict: runtime_error (the candidate's fault), written to the session like any other.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("bad \ud800 kernel \udfff")
