"""Red team 9, HONEST (KernelBench level1/4, matrix-vector product, K = 131072): the float64-accumulating
matvec of tests/candidates/redteam/honest_matvec_double_accumulate.py with a tail loop, so it is right at
every K (that one reads past a row whose length is not a multiple of 4). More exact than the float32
reference, whose own rounding over 131072 terms is ~2e-3 against float64.

The trials and the timed calls judge an output outside tolerance once more against float64 (the reference's
own error added), but the judge of other sizes (`--shapes strict`, `--shapes warn`) and of `--compiled` gave
the judge no float64 result: the same honest output, fine in every trial, failed there.

TRUE verdict: correct (under --shapes strict and under --compiled too).
Before: `--shapes strict`: incorrect, "correct at the problem's sizes but not at M=512 (wrong output in M=512
(before the reference): 4 of 512 values outside tolerance)" (seen for the K%4 version, same arithmetic);
`--compiled`: incorrect "fails under torch.compile" by reading (the same judge call, no float64 fallback).
After: correct.
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
        int64_t k = 0;
        for (; k + 4 <= K; k += 4) {
            s0 += (double)row[k] * b[k]; s1 += (double)row[k + 1] * b[k + 1];
            s2 += (double)row[k + 2] * b[k + 2]; s3 += (double)row[k + 3] * b[k + 3];
        }
        for (; k < K; ++k) s0 += (double)row[k] * b[k];
        o[i] = (float)((s0 + s1) + (s2 + s3));
    }
    return out;
}
"""

ext = load_inline(name="rt9_matvec_f64acc_any_k", cpp_sources=cpp_source, functions=["matvec"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.matvec(A.contiguous(), B.contiguous())
