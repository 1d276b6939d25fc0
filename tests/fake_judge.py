"""A judge for tests of what sits above the evaluator (the driver, the app, the loop): no workers.

The real evaluator starts sandboxed workers (2-4 s each to start, 1-2 s to tear down), which is most of
what a driver or app test would spend. This judge runs the reference and the candidate in the test's own
process instead: both built from one seed, outputs compared at the dtype's tolerance, and, when timing
is on, a speedup from the PyTorch compute ops each dispatches (not a clock: on a loaded test machine an
in-process clock says anything). So a wrong candidate is still found wrong and one that does more work
still slower, by running them. It trusts
the candidate completely, so it is only for the candidates of tests/candidates; what the real evaluator
decides is proven by its own tests, and one real end-to-end test per front end joins the two.
"""

from __future__ import annotations

import ast
import itertools
import tempfile
import threading
from pathlib import Path
from typing import Any

import torch

from kevin_tui.evaluator import EvalOptions, Status, Verdict
from kevin_tui.evaluator.evidence import EvidencePart, expect, run_all
from kevin_tui.evaluator.worker.common import import_file
from kevin_tui.evaluator.worker.judge import tolerance_for
from kevin_tui.evaluator.worker.opcount import count_ops
from kevin_tui.judge import JudgeFactory, ProgressFn
from kevin_tui.problem import Problem, ProblemError, top_level_names

SEED = 0
CLOCK = "compute ops dispatched (the tests' in-process judge)"
names = itertools.count()


class InProcessJudge:
    """The Judge protocol (kevin_tui.judge), in this process."""

    def __init__(self, problem: Problem, options: EvalOptions, on_progress: ProgressFn | None = None) -> None:
        self.problem, self.options = problem, options
        self.on_progress = on_progress or (lambda phase, detail: None)
        self.last_log: Path | None = None
        self.evaluated: list[str] = []  # the sources judged, in order
        self.evidence_gate: threading.Event | None = None  # set by a test: evidence waits for it
        try:
            self.reference = import_file(problem.path, f"fake_judge_reference_{next(names)}")
        except Exception as exc:
            raise ProblemError(f"{problem.path}: importing it raised {type(exc).__name__}: {exc}") from None
        try:  # as the real reference worker does before any candidate: a broken problem fails at open
            torch.manual_seed(SEED)
            with torch.no_grad():
                self.reference.Model(*self.reference.get_init_inputs())(*self.reference.get_inputs())
        except Exception as exc:
            raise ProblemError(f"{problem.path}: the reference forward raised {type(exc).__name__}: {exc}") from None

    @property
    def device(self) -> str:
        return "cpu"

    @property
    def environment(self) -> dict[str, Any]:
        return {"device": "cpu", "torch": torch.__version__, "sandbox": "none (the tests' in-process judge)"}

    def prebuild(self, sources: list[str]) -> None:
        """Nothing to build: the test candidates are plain PyTorch."""

    def speed_of_light_line(self) -> str | None:
        return None

    def close(self) -> None:
        """Nothing to stop."""

    def evaluate(self, source: str) -> Verdict:
        return run_all(*self.judge(source))

    def judge(self, source: str) -> tuple[Verdict, InProcessEvidence | None]:
        """The verdict, then (for a correct one, with profile on) a profile part that waits for
        `evidence_gate` when a test sets one: the test decides when the evidence finishes."""
        self.evaluated.append(source)
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            return Verdict(Status.COMPILE_ERROR, f"Python syntax error at line {exc.lineno}: {exc.msg}"), None
        if "ModelNew" not in top_level_names(tree):
            return Verdict(Status.FORMAT_ERROR, "the candidate defines no ModelNew class"), None
        self.on_progress("checking", "in process")
        try:
            verdict, ran = self._run(source)
        except Exception as exc:
            return Verdict(Status.RUNTIME_ERROR, f"the candidate raised {type(exc).__name__}: {exc}"), None
        if verdict.status is not Status.CORRECT or not self.options.profile:
            return verdict, None
        expect(verdict, ["profile"])
        return verdict, InProcessEvidence(self, *ran)

    def _run(self, source: str) -> tuple[Verdict, tuple[torch.nn.Module, list[Any]]]:
        with tempfile.TemporaryDirectory(prefix="fake-judge-") as directory:
            path = Path(directory) / "candidate.py"
            path.write_text(source)
            candidate = import_file(path, f"fake_judge_candidate_{next(names)}")
        init = self.reference.get_init_inputs()
        torch.manual_seed(SEED)
        model = self.reference.Model(*init)
        torch.manual_seed(SEED)
        model_new = candidate.ModelNew(*init)
        torch.manual_seed(SEED)
        inputs = self.reference.get_inputs()
        with torch.no_grad():
            expected, got = model(*inputs), model_new(*inputs)
        atol, rtol = tolerance_for(expected.dtype, self.options.atol, self.options.rtol)
        if got.shape != expected.shape or not torch.allclose(got, expected, atol=atol, rtol=rtol):
            difference = (got - expected).abs().max().item() if got.shape == expected.shape else float("nan")
            return Verdict(Status.INCORRECT, f"output mismatch: max abs difference {difference:.3g}"), (
                model_new,
                inputs,
            )
        if not self.options.timing:
            return Verdict(Status.CORRECT, "correct on every trial (timing skipped)"), (model_new, inputs)
        speedup = _compute_ops(model, inputs) / _compute_ops(model_new, inputs)
        verdict = Verdict(Status.CORRECT, "correct; cost counted in process", speedup=speedup, clock=CLOCK)
        return verdict, (model_new, inputs)


class InProcessEvidence:
    """The LaterEvidence of the in-process judge: one profile part, the ops forward dispatches."""

    def __init__(self, judge: InProcessJudge, model: torch.nn.Module, inputs: list[Any]) -> None:
        self.judge, self.model, self.inputs = judge, model, inputs
        self._parts = ["profile"]
        self.cancelled = threading.Event()

    @property
    def parts(self) -> list[str]:
        return list(self._parts)

    def next_part(self) -> EvidencePart | None:
        gate = self.judge.evidence_gate
        while gate is not None and not gate.wait(0.02):
            if self.cancelled.is_set():
                break
        if self.cancelled.is_set() or not self._parts:
            return None
        with torch.no_grad():
            _, counts = count_ops(lambda: self.model(*self.inputs))
        rows = [[name, calls, 0.0] for name, calls in sorted(counts.items())]
        self._parts.pop(0)
        return EvidencePart("profile", {"profile": {"ops": rows, "kernels": [], "total_ms": 0.0}})

    def cancel(self) -> None:
        self.cancelled.set()


def _compute_ops(module: torch.nn.Module, inputs: list[Any]) -> int:
    with torch.no_grad():
        _, counts = count_ops(lambda: module(*inputs))
    return max(1, sum(counts.values()))


def gated(gate: threading.Event) -> JudgeFactory:
    """In-process judges whose evidence waits for `gate`: the test says when the evidence finishes."""

    def make(problem: Problem, options: EvalOptions, on_progress: ProgressFn | None = None) -> InProcessJudge:
        judge = InProcessJudge(problem, options, on_progress)
        judge.evidence_gate = gate
        return judge

    return make
