"""Attacks a fifth red team wrote against the evaluator as it was after the fourth
(tests/candidates/redteam5/, each file's docstring says the attack and the verdict it got before the fix).
The --strict evaluations share conftest's module-scoped evaluator; the timing attacks are checked on the
host's rules directly (on the loaded CI machine a timed evaluation's point estimate is noise). The fused
input-mixing attack (mixing_fused_into_the_kernel.py) is closed by the fresh per-call timed inputs: the
`torch.lerp` it rebinds is no longer called."""

from __future__ import annotations

import pytest

from kevin_tui.evaluator import Status
from kevin_tui.evaluator.host.bindings import reusable
from kevin_tui.evaluator.host.static_checks import cpp_torch_compute, run_static_checks
from kevin_tui.evaluator.host.timing import Round, Side, headline, host_speedup, speedup_interval
from tests.conftest import CANDIDATES

REDTEAM5 = CANDIDATES / "redteam5"


def redteam5(name: str) -> str:
    return (REDTEAM5 / f"{name}.py").read_text()


def side(per_call: list[float], control: float | None = None, cpu_share: float | None = None) -> Side:
    """Rounds of 10 calls (0.1 ms of loop per call); `cpu_share`: the CPU time its processes used, as a
    multiple of the window, charged over one thread."""
    rounds = [Round([value] * 10, None, window_ms=10 * (value + 0.1)) for value in per_call]
    for round_ in rounds if cpu_share is not None else []:
        round_.cpu_s, round_.threads = cpu_share * round_.window_ms / 1e3, 1
    controls = [Round([control] * 10, None, window_ms=10 * (control + 0.1)) for _ in per_call] if control else []
    return Side(rounds, controls)


# -- the headline: a wider interval only ever lowers it --------------------------------------------------


def test_a_slowed_control_or_noise_never_raises_a_slow_kernels_headline():
    """slowed_control.py: the reference model made 6x slower in the candidate's own process widened the
    interval of a 2x-slower kernel past 1.0, and the headline (batch reward, RL export) read 1.0."""
    reference = side([1.0, 1.1, 0.9, 1.05, 0.95] * 2)
    slow = side([2.0, 2.3, 1.9, 2.0, 1.8] * 2, control=6.0)
    low, high = speedup_interval(reference, slow)
    point = host_speedup(reference, slow)
    assert low <= point < 0.6 < 1.0 < high  # the control's bias widened it past 1.0
    assert headline(point, (low, high)) == pytest.approx(point)
    assert headline(0.5, (0.3, 1.7)) == 0.5
    assert headline(1.3, (0.9, 1.6)) == 1.0  # no measurable gain: never above 1.0
    assert headline(2.0, (1.5, 2.5)) == 2.0 and headline(3.0, (1.5, 2.5)) == 2.5


# -- the clock: CPU time on more cores than the reference has is charged ----------------------------------


def test_cpu_time_beyond_the_references_threads_is_charged():
    """loop_work_on_another_core.py: the loop's inputs and the answers made by two threads of the
    candidate's own, outside the call the worker times: the round on the host's clock halves."""
    reference = side([1.0] * 10)
    two_cores = side([0.45] * 10, cpu_share=2.0)  # the same work in half the wall time, on two cores
    assert host_speedup(reference, side([0.45] * 10)) > 2.0  # what the wall clock alone says
    assert host_speedup(reference, two_cores) == pytest.approx(1.0, rel=0.1)
    honest = side([0.5] * 10, cpu_share=0.98)  # one thread: the window is charged, as before
    assert host_speedup(reference, honest) == pytest.approx(host_speedup(reference, side([0.5] * 10)))


# -- the static checks read the C++ ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "named"),
    [("strict_aten_hidden_from_the_count", "at::relu (C++)"), ("strict_aten_cpu_kernel_direct", "at::cpu::clamp_min")],
)
def test_pytorch_compute_in_the_cpp_source_is_a_finding(name, named):
    found = {w.code: w.message for w in run_static_checks(redteam5(name))}
    assert named in found.get("torch_compute_ops", ""), found


def test_an_honest_cpp_kernel_using_torch_helpers_is_no_finding():
    assert run_static_checks(redteam5("honest_cpp_with_torch_helpers")) == []
    operator = """
    at::Tensor relu_op(const at::Tensor& x) {
        at::AutoDispatchBelowADInplaceOrView guard;
        auto out = torch::empty_like(x);
        float* o = out.data_ptr<float>();  // at::relu(x) would do: this writes it by hand
        for (int64_t i = 0; i < x.numel(); ++i) o[i] = std::max(x.data_ptr<float>()[i], 0.f);
        return out;
    }
    TORCH_LIBRARY(rt5, m) { m.def("relu(Tensor x) -> Tensor", relu_op); }
    """
    assert cpp_torch_compute(operator) == []
    assert cpp_torch_compute(operator.replace("auto out = torch::empty_like(x);", "auto out = at::relu(x);"))


def test_library_attributes_assigned_in_one_tuple_are_a_monkey_patch():
    found = {w.code: w.message for w in run_static_checks(redteam5("loop_work_on_another_core"))}
    assert "Pool.schedule" in found.get("monkey_patch", "") and "Pool.args" in found["monkey_patch"], found


# -- binding objects -----------------------------------------------------------------------------------------


def test_a_main_cpp_with_inline_assembly_is_never_reused():
    """binding_object_embeds_unkeyed_file.py: `.incbin "build.ninja"` put the linker flags (not in the
    key) into main.o; a later build with other flags linked it and was judged on the first's object."""
    spec = {"cpp_sources": [], "extra_cflags": [], "extra_include_paths": []}
    source = redteam5("binding_object_embeds_unkeyed_file").split('r"""', 1)[1].split('"""', 1)[0]
    assert not reusable({**spec, "cpp_sources": [source]})
    for text in ('asm(".include \\"cuda.cu\\"");', '__asm__("nop");', "#embed <data.bin>"):
        assert not reusable({**spec, "cpp_sources": [text]}), text
    assert reusable({**spec, "cpp_sources": ["#include <vector>\nint embedding_rows(int n) { return n; }"]})


# -- evaluations ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("strict_aten_hidden_from_the_count", Status.REJECTED),
        ("strict_aten_cpu_kernel_direct", Status.REJECTED),
        ("honest_cpp_with_torch_helpers", Status.CORRECT),
    ],
)
def test_strict_reads_the_extension(strict, name, expected):
    verdict = strict.evaluate(redteam5(name))
    assert verdict.status is expected, verdict.message
    if expected is Status.REJECTED:
        assert "torch_compute_ops" in verdict.message and "torch_compute_in_extension" in verdict.message


def test_strict_reads_the_kernels_the_built_library_calls_however_the_source_spelt_them(strict):
    """The sixth red team's `strict_namespace_alias.py`: a namespace alias hid `at::cpu::clamp_min` from the
    text scan and the dispatcher-free call from the op count (`correct` under --strict); the library's
    imported symbols name it."""
    source = (CANDIDATES / "redteam6" / "strict_namespace_alias.py").read_text()
    verdict = strict.evaluate(source)
    assert verdict.status is Status.REJECTED and "torch_compute_in_extension" in verdict.message, verdict.message
    assert "at::cpu::clamp_min" in verdict.details["builds"][0]["torch_calls"]
