"""HONEST, WRONGLY REJECTED: a matrix-vector product (level1/4, K = 131072) that accumulates in float64
and rounds once, so it is MORE accurate than the float32 reference it is judged against.

(1) The judge wants every element within min(1e-4, 1e-4*max|ref|) + 1e-4*|ref| of the reference's
    float32 result. A dot product of 131072 terms has a float32 rounding error of order
    eps*sqrt(K)*|partial sums| ~ 1e-3 (the reference's own error against float64 is that large), so
    elements whose value happens to be near zero are judged against the reference's rounding noise:
    any other summation order — here a more exact one — fails them.
(2) TRUE verdict: correct (its error against a float64 ground truth is far below the reference's).
(3) GOT (this branch, CPU): incorrect, "wrong output in trial 2 (before the reference): 2 of 256
    values outside tolerance". Measured (seed 1): max error vs float64 3.0e-5 for this kernel,
    2.2e-3 for the reference itself.
(4) Weakness: kevin_tui/evaluator/worker/judge.py compare_tensor / TOLERANCES (fp32 1e-4, atol capped
    at 1e-4 absolute whatever the reduction length): the tolerance does not scale with the error the
    reference itself makes (KernelBench's own checker uses 1e-2).
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor matvec(torch::Tensor A, torch::Tensor B) {
    const int64_t M = A.size(0), K = A.size(1);
    auto out = torch::empty({M, 1}, A.options());
    const float* a = A.data_ptr<float>();
    const float* b = B.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i) {
        const float* row = a + i * K;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int64_t k = 0; k < K; k += 4) {
            s0 += (double)row[k] * b[k]; s1 += (double)row[k + 1] * b[k + 1];
            s2 += (double)row[k + 2] * b[k + 2]; s3 += (double)row[k + 3] * b[k + 3];
        }
        o[i] = (float)((s0 + s1) + (s2 + s3));
    }
    return out;
}
"""

ext = load_inline(name="redteam_matvec_f64acc", cpp_sources=cpp_source, functions=["matvec"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return ext.matvec(A.contiguous(), B.contiguous())
