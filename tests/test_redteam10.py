"""Attacks a tenth red team wrote against the evaluator and `apply --check` (tests/candidates/redteam10/, each
file's docstring says the attack, its true verdict and what it got before the fix)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from kevin_tui.usermodel.check import compare_norm
from kevin_tui.usermodel.training_check import compiled, gradients, loss_weights
from tests.truths import exactly

# -- apply --check: a compiled model that differs in kind, not in values, is never within compile's own bar --------


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x))


class DetachedWhenCompiled(Block):
    """compiled_cuts_the_graph.py in small: the block's own code, its output detached under torch.compile."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        return out.detach() if torch.compiler.is_compiling() else out


class WiderWhenCompiled(Block):
    """float64 under torch.compile where the model gives float32 (a dtype a compiled model does not expect)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        return out.double() if torch.compiler.is_compiling() else out


def _within(expected, got, at):
    return compare_norm(expected, got, None, None, at)


@pytest.mark.parametrize("kernel", [DetachedWhenCompiled, WiderWhenCompiled])
def test_a_compiled_model_that_cuts_the_graph_or_changes_dtype_fails_apply_check(kernel):
    """training_check.compiled let a compiled run differ from eager by twice compile's own difference, read from
    the comparison's figure; a gradient missing or another dtype reported a figure of 0.0, always within the bar:
    `apply --check` passed (and installed with the kernel's own backward) a kernel under which no gradient reaches
    anything when the model is compiled."""
    torch.manual_seed(0)
    before = Block()
    after = kernel()
    after.load_state_dict(before.state_dict())
    args = [torch.randn(4, 8)]
    with torch.no_grad():
        expected = before(*args)
    weights = loss_weights(expected)
    _, expected_grads = gradients(before, args, weights)
    figures, why = compiled(copy.deepcopy(before), after, args, expected, expected_grads, weights, _within)
    assert why is not None and "compiled:" in why, figures
    assert ("no gradient reaches" in why) if kernel is DetachedWhenCompiled else ("float64" in why)


def test_an_honest_block_still_passes_under_compile():
    torch.manual_seed(0)
    before = Block()
    after = copy.deepcopy(before)
    args = [torch.randn(4, 8)]
    with torch.no_grad():
        expected = before(*args)
    weights = loss_weights(expected)
    _, expected_grads = gradients(before, args, weights)
    _, why = compiled(copy.deepcopy(before), after, args, expected, expected_grads, weights, _within)
    assert why is None, why


# -- the judge's float64 fallback judges the whole output, not only the float tensors it can pair -------------------


def _moved_past_the_tolerance(sums: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """second_output_dropped.py's trigger: the row furthest from float64, moved just past the tolerance towards it."""
    row = int((exact - sums.double()).abs().argmax())
    value = float(sums[row])
    tolerance = min(1e-4, 1e-4 * float(sums.abs().max())) + 1e-4 * abs(value)
    direction = 1.0 if float(exact[row]) > value else -1.0
    moved = torch.tensor(value + direction * tolerance, dtype=torch.float32)
    while abs(float(moved) - value) <= tolerance:
        moved = torch.nextafter(moved, torch.tensor(direction * float("inf")))
    sums = sums.clone()
    sums[row] = moved
    return sums


@pytest.fixture(scope="module")
def sums_and_tanh():
    """tests/problems/sums_and_tanh.py's outputs for one input: float32, float64, and the moved row sums."""
    x = torch.randn(64, 4096, generator=torch.Generator().manual_seed(1))
    ref, ref64 = (x.sum(-1), torch.tanh(x)), (x.double().sum(-1), torch.tanh(x.double()))
    return ref, ref64, _moved_past_the_tolerance(ref[0], ref64[0])


@pytest.mark.parametrize("second", [None, 0.5, "tanh in float64", "tanh on another device", "a list"])
def test_the_float64_fallback_still_judges_every_other_output(sums_and_tanh, second):
    """second_output_dropped.py: `(row sums, None)` for `(row sums, tanh(x))` was `correct`, since one row sum
    moved just past the tolerance (towards float64) sent the trial to the fallback, which judged the float tensors
    it could pair and nothing else: None, a number, another dtype or device, another structure went unseen."""
    from kevin_tui.evaluator.worker.judge import judge_trial
    from kevin_tui.evaluator.worker.tensorfile import Leaf

    ref, ref64, moved = sums_and_tanh
    made = {
        "tanh in float64": Leaf(ref64[1], "cpu"),
        "tanh on another device": Leaf(ref[1], "cuda:0"),
        "a list": [Leaf(ref[1], "cpu")],
    }
    got = (Leaf(moved, "cpu"), made.get(second, second) if isinstance(second, str) else second)
    judged = judge_trial(ref, {"before": got}, "cpu", None, None, "trial 1", precise=exactly(ref64))
    assert not judged.passed and "output 1" in judged.message, judged


def test_an_exact_first_output_beside_a_right_second_still_passes(sums_and_tanh):
    from kevin_tui.evaluator.worker.judge import judge_trial
    from kevin_tui.evaluator.worker.tensorfile import Leaf

    ref, ref64, moved = sums_and_tanh
    got = (Leaf(moved, "cpu"), Leaf(ref64[1].float(), "cpu"))
    assert not judge_trial(ref, {"before": got}, "cpu", None, None, "trial 1").passed  # outside tolerance alone
    judged = judge_trial(ref, {"before": got}, "cpu", None, None, "trial 1", precise=exactly(ref64))
    assert judged.passed and "own error" in judged.checks[0].detail, judged


# -- both workers draw the same timed inputs and build the same weights, whatever generator the problem uses --------


def _numpy_problem():
    import numpy as np

    def get_inputs():
        return [torch.from_numpy(np.random.standard_normal((4, 8)).astype(np.float32))]

    return get_inputs


def test_timed_inputs_from_numpy_are_the_same_in_every_worker():
    """honest_relu_numpy_inputs.py: each worker draws a timed call's inputs from the round's seed, but only
    torch's generators were seeded, so a problem drawing with numpy got other inputs in the candidate's worker
    than in the reference's, and an honest ReLU was `incorrect` in timing round 1. Another worker is another
    generator state: here numpy's state moved between two draws of the same call."""
    import numpy as np

    from kevin_tui.evaluator.worker.inputs import TimedInputs

    inputs = TimedInputs(_numpy_problem(), "cpu")
    first = inputs.args(1234, 5)
    np.random.standard_normal(3)  # what the other worker's numpy has done is not this one's
    assert torch.equal(inputs.args(1234, 5)[0], first[0])
    assert not torch.equal(inputs.args(1234, 6)[0], first[0])  # still a fresh draw for every call


def test_weights_from_python_random_are_the_same_in_every_worker():
    import random

    from kevin_tui.evaluator.worker.common import seeded

    def build() -> list[float]:
        return [random.random() for _ in range(3)]

    first = seeded(7, build)
    random.random()
    assert seeded(7, build) == first


def test_a_torch_only_problem_seeds_only_torch_in_its_timed_calls():
    """The ~25 us of seeding Python's and numpy's generators is loop work a candidate's copy could skip, so only a
    problem that draws from them pays it."""
    import random

    from kevin_tui.evaluator.worker.inputs import TimedInputs

    assert not TimedInputs(lambda: [torch.randn(4, 8)], "cpu").every_generator
    assert TimedInputs(_numpy_problem(), "cpu").every_generator
    assert TimedInputs(lambda: [torch.randn(4, 8) * random.random()], "cpu").every_generator


# -- the trial whose precision is measured is the host's secret, not the first ----------------------------------------


def test_an_untimed_kernel_narrow_after_its_first_trial_gets_the_lower_precision_warning(
    relu_problem, build_cache, monkeypatch
):
    """narrow_after_the_first_trial_untimed.py: redteam8's kernel, exact on its first two calls and narrow after,
    evaluated without timing: only the first trial's precision was measured (the candidate knows which trial is
    first), so it was `correct` with precision {0, 0} (also under --strict). The host names the measured trial in
    secret now; here it names the fourth."""
    from kevin_tui.evaluator import EvalOptions, Evaluator, Status
    from kevin_tui.evaluator.host import candidate_run
    from tests.conftest import CANDIDATES

    monkeypatch.setattr(candidate_run.secrets, "randbelow", lambda n: min(3, n - 1))
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate((CANDIDATES / "redteam8" / "lower_precision_after_the_first_trial.py").read_text())
    assert verdict.status is Status.CORRECT, verdict.message
    assert "lower_precision" in {w.code for w in verdict.warnings}, verdict.evidence.get("precision")


def test_a_problem_whose_inputs_no_seed_fixes_is_unusable_not_every_candidates_failure(tmp_path):
    """tests/problems/unseeded_inputs.py draws with os.urandom: each worker drew other timed inputs, so every
    candidate, honest ones too, was `incorrect` at timing round 1. The reference's probe draws twice from one
    seed and calls such a problem broken (the user's to fix), before any candidate is judged."""
    from kevin_tui.evaluator.worker.reference import ProblemBroken, Reference
    from tests.conftest import REPO

    events: list[str] = []

    class Channel:
        def emit(self, event: str, **fields: object) -> None:
            events.append(event)

    def probed(name: str) -> None:
        request = {"problem_path": str(REPO / "tests" / "problems" / name), "device": "cpu",
                   "outbox": str(tmp_path), "init_seed": 1}  # fmt: skip
        Reference(request, Channel()).probe(8)

    with pytest.raises(ProblemBroken, match="other inputs from the same seed"):
        probed("unseeded_inputs.py")
    probed("sorted_segments.py")  # a problem that draws alike stays usable
    probed("float_scalar.py")
    probed("nan_inputs.py")  # NaN drawn twice is alike
