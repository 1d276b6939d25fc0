"""Red team 9 (KernelBench level1/19 ReLU, CPU, pure Python): a wrong kernel whose trial output file names a
tensor of shape [0, 2**63]. Zero elements, so the size check (nbytes == prod(shape) * itemsize == 0) passes,
but `torch.empty([0, 2**63])` raises TypeError (and [0, 2**62, 2**62] RuntimeError "Stride calculation
overflowed") in the reference worker's reader, which caught only OSError/TensorFileError/MemoryError: the
reference worker crashed, the host called it `reference_lost` ("evaluate this one again"), the evaluator's
failure, never the candidate's.

TRUE verdict: incorrect (its output file is unusable). The candidate rewrites the tensor file encoder of its
own process (every byte of its file is its own).
Before: runtime_error, details.reference_lost = true ("the reference worker crashed ... evaluate this one again").
After: incorrect ("the candidate's output file for trial 1 is unusable: ...").
"""

import sys

import torch
import torch.nn as nn

writer = sys.modules["kevin_tui.evaluator.worker.tensorfile"]
encode = writer._encode


def _encode(value, blobs, offset, depth):
    node = encode(value, blobs, offset, depth)
    if node.get("t") == "tensor":
        node.update(shape=[0, 2**63], nbytes=0)
    return node


writer._encode = _encode


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
