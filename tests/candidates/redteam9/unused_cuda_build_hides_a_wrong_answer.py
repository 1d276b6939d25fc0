"""Red team 9 (KernelBench level1/19 ReLU, evaluated with --device cpu on a machine with nvcc): a wrong CPU
answer (zeros) beside a CUDA extension that is built and never called. Any CUDA build on a CPU evaluation
ends the run right after loading with `compiled` ("built for real with nvcc; there is no CUDA device here,
so it was not run or checked"), although forward runs on the CPU and could have been judged; `compiled`
ranks above `incorrect` (ranking.STATUS_ORDER), so in a best-of-N on a CPU machine this wrong candidate
ranks above every honest-but-wrong one.

TRUE verdict: incorrect (its forward runs here and returns zeros).
Got: compiled (NOT fixed on this branch: see /work/notes/redteam9.md).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void nothing_kernel(float* x) { if (x) x[0] = x[0]; }
torch::Tensor nothing(torch::Tensor x) { return x; }
"""

ext = load_inline(
    name="rt9_unused_cuda",
    cpp_sources="torch::Tensor nothing(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["nothing"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
