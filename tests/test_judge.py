import torch

from kevin_tui.evaluator.judge import Leaf, compare_tensor, judge


def plain(t: torch.Tensor) -> list[Leaf]:
    return [Leaf("torch.Tensor", t, "cpu")]


def test_equal_outputs_pass():
    ref = torch.randn(8, 8)
    assert compare_tensor(ref, ref.clone(), None, None) is None


def test_fp32_tolerance_is_tight_and_fp16_loose():
    ref = torch.randn(100)
    assert compare_tensor(ref, ref * (1 + 5e-5), None, None) is None
    assert compare_tensor(ref, ref * (1 + 5e-3), None, None) is not None
    half = ref.half()
    assert compare_tensor(half, (ref * (1 + 5e-3)).half(), None, None) is None


def test_zeros_do_not_pass_a_tiny_output_problem():
    ref = torch.randn(1000) * 1e-7
    assert torch.allclose(torch.zeros_like(ref), ref, atol=1e-4, rtol=1e-4)  # the naive check is fooled
    problem = compare_tensor(ref, torch.zeros_like(ref), None, None)
    assert problem is not None and "constant" in problem["reason"]
    assert compare_tensor(ref, ref * (1 + 1e-6), None, None) is None


def test_small_scale_wrong_values_fail_even_if_not_constant():
    ref = torch.randn(1000) * 1e-7
    problem = compare_tensor(ref, ref.flip(0), None, None)
    assert problem is not None and problem["mismatched"] > 0


def test_all_zero_reference_accepts_zeros():
    ref = torch.zeros(10)
    assert compare_tensor(ref, torch.zeros(10), None, None) is None


def test_nan_where_reference_is_finite():
    ref = torch.randn(10)
    out = ref.clone()
    out[3] = float("nan")
    assert "NaN" in compare_tensor(ref, out, None, None)["reason"]


def test_nan_where_reference_has_nan_is_fine():
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare_tensor(ref, ref.clone(), None, None) is None
    assert compare_tensor(ref, torch.tensor([1.0, float("nan"), float("-inf")]), None, None) is not None


def test_shape_and_dtype():
    ref = torch.randn(4, 4)
    assert "shape" in compare_tensor(ref, ref.flatten(), None, None)["reason"]
    assert "dtype" in compare_tensor(ref, ref.double(), None, None)["reason"]


def test_mismatch_figures_point_at_the_worst_element():
    ref = torch.zeros(3, 4) + 1
    out = ref.clone()
    out[2, 1] = 5.0
    problem = compare_tensor(ref, out, None, None)
    assert problem["worst_index"] == [2, 1]
    assert problem["max_abs_error"] == 4.0 and problem["expected"] == 1.0 and problem["got"] == 5.0


def test_subclass_and_device_rejected():
    ref = torch.randn(3)
    runs = [{"before": [Leaf("__main__.Agreeable", None, None)], "after": plain(ref)}]
    verdict = judge([ref], runs, "cpu")
    assert not verdict.passed and "not a plain torch.Tensor" in verdict.message
    runs = [{"before": [Leaf("torch.Tensor", ref, "cuda:0")], "after": plain(ref)}]
    assert "cuda:0" in judge([ref], runs, "cpu").message


def test_stale_answer_is_named():
    refs = [torch.randn(5), torch.randn(5)]
    runs = [
        {"before": plain(refs[0]), "after": plain(refs[0])},
        {"before": plain(refs[0]), "after": plain(refs[0])},
    ]
    verdict = judge(refs, runs, "cpu")
    assert not verdict.passed and "previous call" in verdict.message
    assert verdict.mismatch["trial"] == 2


def test_tuple_outputs():
    a, b = torch.randn(2), torch.randn(3)
    runs = [{"before": plain(a) + plain(b), "after": plain(a) + plain(b)}]
    assert judge([(a, b)], runs, "cpu").passed
    runs = [{"before": plain(a), "after": plain(a)}]
    assert "1 outputs, expected 2" in judge([(a, b)], runs, "cpu").message


def test_integer_outputs_need_exact_match():
    ref = torch.arange(5)
    assert compare_tensor(ref, ref.clone(), None, None) is None
    assert compare_tensor(ref, ref + 1, None, None) is not None
