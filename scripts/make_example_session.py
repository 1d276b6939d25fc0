"""Produce sessions/example-relu.jsonl: the shipped example session that anyone can replay.

    python3 scripts/make_example_session.py

How it is made (also stated in the session's header note and the README): the replies are
hand-written in the style of Kevin's (reasoning, then one code block, then a summary), replayed by
the scripted backend; everything else is real: the prompts the loop built, the g++ builds, the
correctness checks and timings of the evaluator, on this machine's CPU (`--device cpu`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBLEM = REPO / "kevin_tui" / "demo" / "relu.py"  # the demo's problem (kevin-tui demo replays the same replies)
REPLIES = REPO / "kevin_tui" / "demo" / "relu_replies.json"

HEAD = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_source = """
'''
TAIL = '''"""

relu_ext = load_inline(name="relu_ext", cpp_sources=relu_source, functions=["relu_forward"],
                       extra_cflags=["-O3"{flags}], extra_ldflags=[{ldflags}])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x.contiguous())
'''


def kernel(body: str, flags: str = "", ldflags: str = "") -> str:
    return HEAD + body.strip("\n") + "\n" + TAIL.format(flags=flags, ldflags=ldflags)


BROKEN = """
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : zero;
    return out;
}
"""
IN_PLACE = """
torch::Tensor relu_forward(torch::Tensor x) {
    float* p = x.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = p[i] > 0.f ? p[i] : 0.f;
    return x;
}
"""
SERIAL = """
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""
PARALLEL = """
#include <omp.h>

torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* __restrict__ in = x.data_ptr<float>();
    float* __restrict__ o = out.data_ptr<float>();
    const int64_t n = x.numel();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

REPLIES_DATA = [
    {
        "reasoning": "ReLU is elementwise and memory-bound: one read and one write per element. On this machine "
        "the kernel runs on the CPU, so a C++ loop through load_inline is the way in. Write out = max(x, 0).",
        "answer": "```python\n" + kernel(BROKEN) + "```\nA single C++ loop computes max(x, 0) into a new tensor.",
    },
    {
        "reasoning": "The build failed: `zero` is not declared. Allocating a new output costs memory traffic; "
        "writing the result in place would halve it.",
        "answer": "```python\n" + kernel(IN_PLACE) + "```\nComputes ReLU in place to avoid allocating an output.",
    },
    {
        "reasoning": "In place changes the caller's input, which the checker rejects. Go back to a separate "
        "output with a plain serial loop and make sure it is correct first.",
        "answer": "```python\n" + kernel(SERIAL) + "```\nA serial loop into a fresh output tensor; correct first.",
    },
    {
        "reasoning": "Correct but slow: PyTorch's eager ReLU is vectorised and multi-threaded. Parallelise with "
        "OpenMP and let the compiler vectorise with `omp simd` and __restrict__ pointers.",
        "answer": "```python\n"
        + kernel(PARALLEL, ', "-fopenmp"', '"-fopenmp"')
        + "```\nOpenMP threads plus SIMD over a restrict-qualified loop.",
    },
]


def main() -> None:
    REPLIES.write_text(json.dumps(REPLIES_DATA, indent=1) + "\n")
    sessions = REPO / "sessions"
    for old in sessions.glob("*.jsonl"):
        old.unlink()
    subprocess.run(
        [sys.executable, "-m", "kevin_tui", "optimize", str(PROBLEM), "--headless", "--device", "cpu",
         "--turns", str(len(REPLIES_DATA)), "--backend", "scripted", "--script", str(REPLIES),
         "--sessions-dir", str(sessions)],
        check=True, cwd=REPO,
    )  # fmt: skip
    (made,) = sessions.glob("*.jsonl")
    made.rename(sessions / "example-relu.jsonl")


if __name__ == "__main__":
    main()
