"""Red team 28 (an honest bf16 kernel rejected by the determinism check): a split-K bfloat16 matmul as a GPU kernel
with a float32 workspace and float atomics computes it: 16 K-slices' float32 partial products added into the
workspace in the order their blocks finish (here a new permutation each call, from a call counter), the sum rounded
once to bfloat16, as the reference rounds.

Two runs' float32 sums differ in their last bits, so the odd value that lies near a bfloat16 rounding boundary rounds
to the neighbouring bf16 value in one run: one bf16 step, 2**-7 of its binade, is more than the determinism check's
half of bf16's 1e-2 tolerance for a value just above a power of two (0.25 at 32: allowed 0.16). Each run is within
the tolerance of the reference.

True verdict: correct. Got: incorrect, "two runs on identical inputs disagree, 2 of 262144 values differ between the
two runs (by up to 0.25) (uninitialised memory or a race?)".
"""

import torch
import torch.nn as nn

SLICES = 16


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        step = a.shape[1] // SLICES
        order = torch.randperm(SLICES, generator=torch.Generator().manual_seed(self.calls)).tolist()
        workspace = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32)
        for s in order:  # atomicAdd of each block's float32 partial, in the order the blocks finish
            workspace += a[:, s * step : (s + 1) * step].float() @ b[s * step : (s + 1) * step].float()
        return workspace.to(torch.bfloat16)
