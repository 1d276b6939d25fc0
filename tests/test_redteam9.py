"""Attacks a ninth red team wrote against the evaluator after the eighth's fixes (tests/candidates/redteam9/,
each file's docstring says the attack, its true verdict and what it got before the fix)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
import torch

from kevin_tui.evaluator.worker import tensorfile
from kevin_tui.evaluator.worker.judge import judge_trial
from kevin_tui.evaluator.worker.reference import Reference, write_record
from kevin_tui.evaluator.worker.tensorfile import Leaf
from tests.truths import exactly

# -- a candidate's file that torch refuses is the candidate's, never the reference worker's crash ------------


def _with_header(path: Path, header: object, data: bytes = b"") -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(tensorfile.MAGIC + struct.pack("<Q", len(raw)) + raw + data)
    return path


@pytest.mark.parametrize("shape", [[0, 2**63], [0, 2**62, 2**62], [0, 2**64]])
def test_a_zero_size_tensor_torch_cannot_make_is_an_unusable_file(tmp_path, shape):
    """output_shape_overflow_blames_the_reference.py: a zero-element tensor passes the size check whatever its
    other dimensions are, but torch.empty raises TypeError/RuntimeError for them. The reader let that out, the
    reference worker crashed, and the host called it `reference_lost` (the evaluator's failure, "evaluate this
    one again") instead of the candidate's unusable output."""
    node = {"t": "list", "items": [{"t": "tensor", "dtype": "float32", "shape": shape, "offset": 0, "nbytes": 0}]}
    with pytest.raises(tensorfile.TensorFileError, match="torch cannot make"):
        tensorfile.read(_with_header(tmp_path / "out.kt", node), with_devices=True)


def test_honest_files_still_read(tmp_path):
    value = [torch.zeros(0, 5), torch.arange(6, dtype=torch.float32).reshape(2, 3), (1.5, "x", None)]
    tensorfile.write(tmp_path / "ok.kt", value)
    back = tensorfile.read(tmp_path / "ok.kt")
    assert back[0].shape == (0, 5) and torch.equal(back[1], value[1]) and back[2] == (1.5, "x", None)


# -- every judge of an output may widen to the float32 reference's own error, as the trials' does -------------

ROUNDING_PROBLEM = """
import torch
import torch.nn as nn

N = 64


class Model(nn.Module):
    def forward(self, x):
        return (x + 1e4) - 1e4  # float32 rounds x to ~1e-3: an exact kernel is far from the reference's result


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
"""


class Recorded:
    """A channel that keeps the reference worker's events."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: str, **fields: Any) -> None:
        self.events.append({"event": event, **fields})


def _judged(reference: Any, channel: Recorded, out: Path, value: Any, written: tuple[str, ...], **command: Any) -> bool:
    write_record(out, dict.fromkeys(written, value), [])
    reference.judge_check({"cmd": "judge", "eval": 0, "path": str(out), **command})
    assert channel.events[-1]["event"] == "judged"
    return bool(channel.events[-1]["passed"])


def test_other_sizes_and_torch_compile_judge_an_exact_kernel_as_the_trials_do(tmp_path):
    """honest_matvec_other_sizes.py: an output more exact than the float32 reference passes a trial (it is
    measured against float64 with the reference's own error added) but failed the same judge at another size
    (--shapes) and under --compiled, which gave it no float64 result: an honest kernel `incorrect` there."""
    problem = tmp_path / "rounding.py"
    problem.write_text(ROUNDING_PROBLEM)
    channel = Recorded()
    request = {"problem_path": str(problem), "device": "cpu", "outbox": str(tmp_path), "init_seed": 1}
    reference = Reference(request, channel)
    reference.probe(8)  # as the worker starts (run_reference)
    reference.trials({"eval": 0, "seed": 5, "fresh": 2, "duplicates": 0})
    trial_inputs = [tensorfile.read(Path(p)) for p in channel.events[-1]["paths"]]
    reference.shapes({"eval": 0, "seed": 9, "max_bytes": 1 << 30})
    variants = channel.events[-1]["variants"]
    assert [label for label, _, _ in variants] == ["N=32", "N=128", "N=63"]
    out = tmp_path / "out.kt"
    exact = trial_inputs[1][0].clone()
    assert _judged(reference, channel, out, exact, ("before", "after"), trial=1)  # the trial's judge widens
    label = "trial 2 under torch.compile"
    assert _judged(reference, channel, out, exact, ("compiled",), trial=1, label=label, runs=["compiled"])
    for label, path, index in variants:
        (x,) = tensorfile.read(Path(path))
        assert _judged(reference, channel, out, x.clone(), ("before", "after"), trial=index, label=label), label
        assert not _judged(reference, channel, out, x + 3e-3, ("before", "after"), trial=index, label=label)


# -- a constant output is judged against float64 too: exact where the truth is constant, still a guess elsewhere


def test_an_exact_constant_passes_where_only_the_references_rounding_varies():
    """honest_exact_constant.py: each row's softmax summed is exactly 1; the float32 reference varies around it
    by ~1e-7, and "constant output where the reference varies" failed the exact answer with no float64 look."""
    x = torch.randn(256, 4096, generator=torch.Generator().manual_seed(3))
    ref, ref64 = torch.softmax(x, dim=1).sum(dim=1), torch.softmax(x.double(), dim=1).sum(dim=1)
    assert float(ref.max()) != float(ref.min())
    exact = {"before": Leaf(torch.ones(256), "cpu")}
    assert judge_trial(ref, exact, "cpu", None, None, "trial 1", precise=exactly(ref64)).passed
    # a constant where the truth itself varies (by less than the tolerance) is still the guess the check catches
    truth = 1 + 1e-6 * torch.randn(256, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    guess = {"before": Leaf(torch.ones(256), "cpu")}
    assert not judge_trial(truth.float(), guess, "cpu", None, None, "trial 1", precise=exactly(truth)).passed


# -- a Python number is judged in the dtype the reference computed it in --------------------------------------


def _number_reference(tmp_path: Path, problem: str) -> tuple[Reference, Recorded, torch.Tensor]:
    """A real Reference on a problem returning a Python number, its first trial run; that trial's input."""
    channel = Recorded()
    path = str(Path(__file__).parent / "problems" / problem)
    reference = Reference({"problem_path": path, "device": "cpu", "outbox": str(tmp_path), "init_seed": 1}, channel)
    reference.probe(8)
    reference.trials({"eval": 0, "seed": 5, "fresh": 1, "duplicates": 0})
    (x,) = tensorfile.read(Path(channel.events[-1]["paths"][0]))
    return reference, channel, x


def test_a_python_number_is_judged_at_the_tolerance_of_the_dtype_the_reference_computed_it_in(tmp_path):
    """float64_scalar_in_float32.py: a float64 problem's `.item()` was judged with torch's default dtype's
    tolerance (float32: 1e-4), ~1000x looser than its tensor would be: the number computed in float32 was
    `correct`."""
    reference, channel, x = _number_reference(tmp_path, "float64_scalar.py")
    out = tmp_path / "out.kt"
    exact = float(x.var(unbiased=False))  # honest_float64_scalar.py
    assert _judged(reference, channel, out, exact, ("before", "after"), trial=0)
    narrow = float((x.float() * x.float()).mean() - x.float().mean() ** 2)
    assert not _judged(reference, channel, out, narrow, ("before", "after"), trial=0)
    assert "atol 1e-07" in channel.events[-1]["message"]


def test_a_python_numbers_precision_is_measured_like_a_tensors(tmp_path):
    """The precision evidence skipped anything but tensors: a float32 problem's number now has it, and one half
    the tolerance off the float64 sum uses far more of it than the float32 reference's own sum does."""
    reference, channel, x = _number_reference(tmp_path, "float_scalar.py")
    out = tmp_path / "out.kt"
    measured = {"trial": 0, "precision": True}  # the trial the host measures (redteam10: named in secret)
    assert _judged(reference, channel, out, float(x.sum()), ("before", "after"), **measured)
    assert channel.events[-1]["precision"] is None  # measured after the last trial (redteam28), when asked
    reference.deferred_precision({"cmd": "trial_precision"})
    honest = channel.events[-1]["precision"]
    assert honest is not None and honest["candidate"] < 0.1
    exact = float(x.double().sum())
    off = exact + 0.5 * (1e-4 + 1e-4 * abs(exact))
    assert _judged(reference, channel, out, off, ("before", "after"), **measured)
    reference.deferred_precision({"cmd": "trial_precision"})
    precision = channel.events[-1]["precision"]
    assert precision["candidate"] > 0.4 and precision["candidate"] > 10 * precision["reference"]


def test_a_python_number_more_exact_than_the_reference_passes_as_a_tensor_would(tmp_path):
    """The float64 fallback (a kernel more exact than the float32 reference) judged tensors only: the exact sum of
    (x + 1e4) - 1e4, which float32 rounds by ~1e-3 per value, failed as a number."""
    problem = tmp_path / "rounded_sum.py"
    problem.write_text(
        ROUNDING_PROBLEM.replace("N = 64", "N = 1024").replace(
            "return (x + 1e4) - 1e4", "return ((x + 1e4) - 1e4).sum().item()"
        )
    )
    channel = Recorded()
    reference = Reference(
        {"problem_path": str(problem), "device": "cpu", "outbox": str(tmp_path), "init_seed": 1}, channel
    )
    reference.probe(8)
    reference.trials({"eval": 0, "seed": 5, "fresh": 1, "duplicates": 0})
    (x,) = tensorfile.read(Path(channel.events[-1]["paths"][0]))
    out = tmp_path / "out.kt"
    exact = float(x.double().sum())
    assert _judged(reference, channel, out, exact, ("before", "after"), trial=0)
    # ~10x the float32 sum's typical own error (~9e-3; drawn again on nudged inputs, own_error.py)
    assert not _judged(reference, channel, out, exact + 0.1, ("before", "after"), trial=0)
