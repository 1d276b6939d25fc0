"""Red team 28 (an honest complex kernel rejected by the determinism check): complex64 row sums as a GPU kernel with
atomics computes them: each row's 16 slices summed on their own, the partial sums added in the order their blocks
finish (here a new permutation each call, from a call counter). Two runs differ in the last bits of a float32 sum
(~1e-6, against fp32's 1e-4 tolerance), as float atomics do; the determinism check allows half the tolerance for a
float output, but compared a complex one exactly (a complex tensor is no floating-point one to torch).

True verdict: correct. Got: incorrect, "two runs on identical inputs disagree, ... values differ between the two
runs (uninitialised memory or a race?)".
"""

import torch
import torch.nn as nn

SLICES = 16


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        z = torch.view_as_complex(a)
        partial = z.reshape(z.shape[0], SLICES, -1).sum(-1)  # one block per slice
        order = torch.randperm(SLICES, generator=torch.Generator().manual_seed(self.calls)).tolist()
        total = torch.zeros(z.shape[0], dtype=z.dtype)
        for s in order:  # atomicAdd of each block's partial, in the order the blocks finish
            total += partial[:, s]
        return total
