"""Red team 20: memoisation keyed on part of the input, or on all of it, against `apply --check` and eval
(tests/candidates/redteam20/)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from kevin_tui.evaluator import EvalOptions, Evaluator, Status
from kevin_tui.usermodel import check as check_module
from kevin_tui.usermodel.check import check, import_helper
from kevin_tui.usermodel.specs import TensorSpec
from kevin_tui.usermodel.worker import sampler
from tests.conftest import CANDIDATES

HERE = CANDIDATES / "redteam20"


def _linear_case(name: str, seed: int = 0):
    module = import_helper(HERE / f"{name}.py")
    torch.manual_seed(seed)
    net, x = module.Net(), torch.randn(64, 1024)
    fresh = [("new values", [torch.randn(64, 1024)]), ("batch size 128", [torch.randn(128, 1024)])]
    return module, net, [x], fresh


LINEAR_DRAW = [TensorSpec(None, "float32", (64, 1024))]  # what the worker draws each timed call from (its specs)


def _blocks(model: nn.Module, cls: type) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, cls)]


def test_a_memo_keyed_on_every_value_gets_no_hit_in_apply_checks_timed_calls(monkeypatch):
    """content_memo_apply.py: right for any input (a checksum of every value), so it passes; on the check's values
    repeated call after call every timed call after the first was a hit (22-96x reported for a 1x linear)."""
    module, net, args, fresh = _linear_case("content_memo_apply")
    monkeypatch.setattr(check_module, "trainable", lambda model, args: False)  # the training proof is not at issue
    installed: list[nn.Module] = []
    real_install = module.install
    monkeypatch.setattr(module, "install", lambda model, **kw: installed.append(real_install(model, **kw)) or model)
    monkeypatch.setattr(check_module, "import_helper", lambda path: module)
    result = check(net, args, HERE / "content_memo_apply.py", "cpu", {"rounds": 3}, fresh,
                   draw=sampler(LINEAR_DRAW, "cpu"))  # fmt: skip
    assert result["passed"], result["message"]
    (block,) = _blocks(installed[0], module.ModelNew)
    assert block.__dict__.get("hits", 0) == 0, f"{block.__dict__['hits']} timed calls were answered from the memo"


def _installed(monkeypatch, module) -> list[nn.Module]:
    """The models the check installs the kernel in (the helper's install, recorded)."""
    installed: list[nn.Module] = []
    real_install = module.install
    monkeypatch.setattr(module, "install", lambda model, **kw: installed.append(real_install(model, **kw)) or model)
    monkeypatch.setattr(check_module, "import_helper", lambda path: module)
    monkeypatch.setattr(check_module, "trainable", lambda model, args: False)  # the training proof is not at issue
    return installed


def test_a_kernel_updating_its_kept_answer_gets_no_update_in_apply_checks_timed_calls(monkeypatch):
    """incremental_memo_apply.py: timed calls on the check's values with one swapped per call let it update a row
    of its kept answer instead of the matmul (7.7x for a 1x linear); the worker draws each timed call anew."""
    module, net, args, fresh = _linear_case("incremental_memo_apply")
    installed = _installed(monkeypatch, module)
    result = check(net, args, HERE / "incremental_memo_apply.py", "cpu", {"rounds": 3}, fresh,
                   draw=sampler(LINEAR_DRAW, "cpu"))  # fmt: skip
    assert result["passed"], result["message"]
    (block,) = _blocks(installed[0], module.ModelNew)
    assert block.__dict__.get("updates", 0) == 0, f"{block.__dict__['updates']} timed calls were updates"


def test_the_worker_draws_every_timed_call_anew_at_the_checks_shapes():
    from kevin_tui.usermodel.specs import Distribution

    ids = TensorSpec(None, "int64", (8,), Distribution("randint", (0.0, 50.0)))
    draw = sampler([TensorSpec(None, "float32", (8, 16)), ids], "cpu")
    state = torch.random.get_rng_state()
    (a, drawn), (b, _) = draw(), draw()
    assert a.shape == (8, 16) and drawn.dtype == torch.int64 and bool(((drawn >= 0) & (drawn < 50)).all())
    assert not torch.equal(a, b)
    assert torch.equal(torch.random.get_rng_state(), state)  # the model's own generator is left alone


def test_a_memo_keyed_on_the_address_and_a_few_values_fails_apply_check():
    """sampled_memo_apply.py: every input compared differed everywhere from the ones before (new tensors, new
    values), so the memo never answered there: `outputs match`, and every timed call a hit (50-170x)."""
    _, net, args, fresh = _linear_case("sampled_memo_apply")
    kept = args[0].clone()
    result = check(
        net, args, HERE / "sampled_memo_apply.py", "cpu", {"rounds": 2}, fresh, draw=sampler(LINEAR_DRAW, "cpu")
    )
    assert not result["passed"], result["message"]
    assert "a few values changed in place" in result["message"], result["message"]
    assert torch.equal(args[0], kept)  # the check's inputs are put back


class Symmetric(nn.Module):
    """A model that takes a symmetric matrix only (and says so loudly otherwise), with ids beside it."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(50, 32), requires_grad=False)

    def forward(self, a: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        if not torch.equal(a, a.T):
            raise ValueError("a must be symmetric")
        return a[:, :32] @ self.table[ids]


class SymmetricNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Symmetric()

    def forward(self, a: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return self.block(a, ids)


def _symmetric_inputs() -> list[torch.Tensor]:
    m = torch.randn(32, 32)
    return [m + m.T, torch.randint(0, 50, (32,))]


def test_an_honest_kernel_on_structured_inputs_passes_and_the_in_place_change_is_put_back(monkeypatch):
    """A few values changed in place keep a symmetric matrix symmetric and ids valid (eval's near-duplicate rule),
    and the check's own inputs are as they were after."""
    helper = import_helper(HERE / "content_memo_apply.py")  # its matches/install, on another class
    monkeypatch.setattr(helper, "CLASS", "Symmetric")
    monkeypatch.setattr(helper, "ModelNew", type("ModelNew", (Symmetric,), {}))
    monkeypatch.setattr(check_module, "import_helper", lambda path: helper)
    torch.manual_seed(3)
    args, fresh = _symmetric_inputs(), [("new values", _symmetric_inputs())]
    kept = [a.clone() for a in args]
    result = check(SymmetricNet(), args, HERE / "content_memo_apply.py", "cpu", {"rounds": 2}, fresh,
                   draw=_symmetric_inputs)  # fmt: skip
    assert result["passed"], result["message"]
    assert all(torch.equal(a, k) for a, k in zip(args, kept, strict=True))


def test_the_memo_candidates_are_right_on_their_first_call():
    for name in ("content_memo_apply", "sampled_memo_apply"):
        module, net, args, _ = _linear_case(name)
        after = module.install(copy.deepcopy(net))
        with torch.no_grad():
            assert torch.allclose(after(*args), net(*args), atol=1e-5)


@pytest.fixture(scope="module")
def plain(relu_problem, build_cache):
    """An evaluator on ReLU without timing, shared by this module's eval candidates."""
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=build_cache)
    with Evaluator(relu_problem, options, prespawn=False) as evaluator:
        yield evaluator


def test_a_memo_keyed_on_the_address_and_a_few_values_is_incorrect_in_eval(plain):
    """address_memo_eval.py: every input eval gave was a new tensor, or had all of its values changed in place:
    never a hit, `correct`; a few values changed in the same tensor get the old answer."""
    verdict = plain.evaluate((HERE / "address_memo_eval.py").read_text())
    assert verdict.status is Status.INCORRECT, verdict.message
    assert "a few values of its inputs changed in place" in verdict.message, verdict.message


def test_a_versioned_memo_keyed_on_the_address_stays_correct_in_eval(plain):
    verdict = plain.evaluate((HERE / "honest_versioned_memo_eval.py").read_text())
    assert verdict.status is Status.CORRECT, verdict.message
    assert any("a few of their values changed in place" in c.name and c.passed for c in verdict.checks)


def _timed(speedup: float, compiled: float | None):
    """A correct verdict's speed figures (candidate at 1 ms), with a speedup over torch.compile when given."""
    from kevin_tui.evaluator.host.decisions import Finding, decide

    verdict = decide(Finding.CORRECT, f"correct, {speedup}x")
    verdict.speedup, verdict.speedup_interval, verdict.candidate_ms, verdict.reference_ms = speedup, [speedup] * 2, 1, 2
    verdict.details["measured_speedup"] = speedup
    verdict.speedup_compile, verdict.reference_compile_ms = compiled, compiled
    return verdict


def _retried(monkeypatch, first, second):
    from kevin_tui.evaluator.host.candidate_run import HostRun, speed_record
    from kevin_tui.evaluator.host.decisions import Finding, decide

    asked = {"clock_check": {"n": 1}, "speed_if_agreed": speed_record(first)}
    outcomes = [decide(Finding.CLOCK_DISAGREES, "the control ran 9x faster", evidence=asked), second]
    monkeypatch.setattr(HostRun, "measure", lambda self: outcomes.pop(0))
    return HostRun.time(object.__new__(HostRun))


@pytest.mark.parametrize(("first", "second"), [((1.0, 1.2), (1.8, 3.0)), ((1.9, 1.2), (1.8, 3.0))])
def test_a_retry_the_candidate_asks_for_is_no_second_draw_at_the_speedup_over_compile(monkeypatch, first, second):
    """keep_the_lower put the first measurement's headline back but left the retry's speedup over torch.compile
    (the batch report's geometric mean, the commit's figure): 3.0x beside a 1.0x headline, from figures that did
    not even agree (3.0 ms / the restored 1 ms); when the retry's headline stood, its compile figure did too."""
    verdict = _retried(monkeypatch, _timed(*first), _timed(*second))
    assert verdict.speedup == min(first[0], second[0])
    assert verdict.speedup_compile == 1.2 and verdict.reference_compile_ms == 1.2


def test_an_honest_retry_keeps_the_lower_speedup_over_compile_whichever_it_is(monkeypatch):
    verdict = _retried(monkeypatch, _timed(2.1, 2.5), _timed(1.9, 1.6))
    assert verdict.speedup == 1.9 and verdict.speedup_compile == 1.6 and "remeasured" not in verdict.evidence
    assert _retried(monkeypatch, _timed(2.1, None), _timed(1.9, 1.6)).speedup_compile == 1.6


def test_the_calls_of_a_round_are_counted_with_their_draws():
    """A draw per timed call is outside the clock but not outside the wait: a fast kernel whose inputs take 5 ms to
    draw makes at most ROUND_S / 5 ms calls a round (by the call's time alone, 50,000 draws a round)."""
    import time

    from kevin_tui.usermodel.check import ROUND_S, timed_rounds

    draws = 0

    def slow_draw() -> list:
        nonlocal draws
        draws += 1
        time.sleep(0.005)
        return [torch.zeros(1)]

    times = timed_rounds({"before": lambda args: args[0], "after": lambda args: args[0]}, "cpu", 2, slow_draw)
    assert [len(t) for t in times.values()] == [2, 2]
    assert draws <= 3 + 2 * 2 * int(ROUND_S / 0.005), draws  # the warm-ups and the count's own, then two rounds
