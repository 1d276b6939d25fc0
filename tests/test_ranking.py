"""The one ranking rule: status order, then the speedup that counts (an interval's lower bound)."""

from __future__ import annotations

from kevin_tui.protocol.feedback import Feedback
from kevin_tui.protocol.prompt import Attempt, best_attempt
from kevin_tui.ranking import STATUS_ORDER, Score, best_correct, ranked


def test_correct_before_compiled_before_failures_in_a_fixed_order():
    scores = [Score(s) for s in reversed(STATUS_ORDER)] + [Score("pending")]
    assert [s.status for s in ranked(scores, lambda s: s)] == [*STATUS_ORDER, "pending"]


def test_a_solid_speedup_beats_a_noisy_higher_one():
    noisy = Score("correct", 1.3, [0.9, 1.7])
    solid = Score("correct", 1.2, [1.18, 1.22])
    assert ranked([noisy, solid], lambda s: s) == [solid, noisy]


def test_without_intervals_the_fastest_wins_and_ties_keep_their_order():
    a, b, c = Score("correct", 1.1), Score("correct", 2.0), Score("correct", 2.0)
    assert ranked([a, b, c], lambda s: s) == [b, c, a]
    untimed = Score("correct")
    assert ranked([untimed, a], lambda s: s) == [a, untimed]


def test_best_correct_is_none_without_a_correct_item():
    assert best_correct([Score("compiled"), Score("incorrect", 5.0)], lambda s: s) is None
    assert best_correct([Score("incorrect"), Score("correct", 0.5)], lambda s: s) == Score("correct", 0.5)


def test_best_attempt_follows_the_rule():
    slow = Attempt(1, "code", "s", Feedback("correct", "ok", speedup=0.8))
    fast = Attempt(2, "code", "s", Feedback("correct", "ok", speedup=1.5))
    wrong = Attempt(3, "code", "s", Feedback("incorrect", "no", speedup=None))
    assert best_attempt([slow, wrong, fast]) is fast
    assert best_attempt([wrong]) is None
