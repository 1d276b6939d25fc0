"""Red team 8: the kernel's work moved into the timing loop's drawing, paid for by a leaner seeding.

Problem: KernelBench level1/19 ReLU (16 x 16384 floats), CPU.

Every timed call draws its inputs with `worker/common.py::seeded`, which calls `torch.manual_seed`. On a
machine where CUDA is not initialised that also queues a lazy seed for CUDA, XPU and MTIA, and each queueing
takes a `traceback.format_stack()` of the whole worker stack: ~100-280 us per call, part of the reference's
loop overhead that the host subtracts from both sides. In its own process the candidate rebinds the loop's
`seeded` (the name `worker/inputs.py` calls; it is no tripwire) with one that seeds only the CPU generator,
the one `get_inputs` draws from (the same values), and spends the time saved on the ReLU itself, right after
drawing. forward then hands back the answer made for that very input object in ~2 us. Every timed output is
exact; the kernel is a plain C++ ReLU loop, so its TRUE speed is about 1x (honest twin:
honest_relu_loop_twin.py), but the host sees the candidate's round cost no more than the reference's loop
overhead alone, so host time less overhead is nothing and the per-call figure falls back to the candidate's
own ~2 us.

TRUE verdict: correct, speedup about 1x (no more than honest_relu_loop_twin.py gets).
Before (main at 8801afc, --sandbox unshare, loaded 2-core CPU): `correct, 20.64x vs eager (95% interval
9.22-63.72x) (0.022 ms vs 0.451 ms)`; the honest twin in the same session: `correct, no measurable difference
(measured 0.95x, 0.48-2.67x)`. After (the loop seeds the generators directly, and the reference removes its
round file after its reply): `correct, no measurable difference (measured 0.47x, 0.19-19.79x)`; again after merging main:
`correct, no measurable difference (measured 0.81x, 0.61-1.32x)`.
"""

import sys

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

ext = load_inline(name="rt8_relu_loop", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O3"])

_made: list = []  # [input, answer] of the latest draw


def _lean_seeded(seed, fn):
    torch.default_generator.manual_seed(seed)  # torch.manual_seed's CPU part: the generator get_inputs uses
    args = fn()
    if isinstance(args, list) and len(args) == 1 and isinstance(args[0], torch.Tensor):
        _made[:] = [args[0], ext.relu_forward(args[0])]
    return args


loop = sys.modules.get("kevin_tui.evaluator.worker.inputs")
if loop is not None:
    loop.seeded = _lean_seeded


class ModelNew(nn.Module):
    def forward(self, x):
        if _made and _made[0] is x:
            answer = _made[1]
            _made.clear()
            return answer
        return ext.relu_forward(x)
