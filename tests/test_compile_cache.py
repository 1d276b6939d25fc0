"""torch.compile's cache is shared by the reference workers of one machine and out of candidates' reach."""

from __future__ import annotations

from kevin_tui.evaluator import EvalOptions, Evaluator, Status

HIDDEN = """import os
import sys
import torch
import torch.nn as nn

assert "torch._dynamo" in sys.modules, "timed beside a compiled baseline, the worker started without torch._dynamo"
assert not os.path.exists({path!r}), "the reference workers' compile cache is visible to a candidate"
assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") == "/tmp/inductor", os.environ.get("TORCHINDUCTOR_CACHE_DIR")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def test_the_compile_baseline_fills_the_shared_cache_which_no_candidate_sees(relu_problem, tmp_path):
    options = EvalOptions(device="cpu", cache_dir=tmp_path, compile_baseline=True, timing_trials=10, trials=1, timeout_s=600,
                          profile=False, shapes="off")  # fmt: skip
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        shared = evaluator.reference.compile_cache()
        verdict = evaluator.evaluate(HIDDEN.format(path=str(shared)))
    assert verdict.status is Status.CORRECT, verdict.message
    assert verdict.speedup_compile is not None  # the baseline was compiled, by the reference worker
    written = [p for p in shared.rglob("*") if p.is_file()]
    assert written, f"torch.compile wrote nothing under {shared}"
    assert verdict.sandbox in ("bwrap", "unshare")  # with no sandbox a candidate sees everything
