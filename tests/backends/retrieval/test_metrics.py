"""Ranking-agreement metrics against hand-computed and published values."""

from __future__ import annotations

from fractions import Fraction

import pytest

from backends.retrieval.metrics import (
    RankMove,
    compare_rankings,
    jaccard_at_k,
    kendall_tau_b,
    overlap_at_k,
    rank_moves,
    rbo_ext,
)


def test_overlap_and_jaccard_at_k():
    a, b = ["a", "b", "c", "d"], ["b", "e", "a", "f"]
    assert overlap_at_k(a, b, 2) == 0.5            # {a,b} vs {b,e}
    assert jaccard_at_k(a, b, 2) == pytest.approx(1 / 3)
    assert overlap_at_k(a, b, 4) == 0.5            # {a,b} shared of 4
    assert jaccard_at_k(a, b, 4) == pytest.approx(2 / 6)
    assert overlap_at_k(["x", "y"], ["y", "x"], 5) == 1.0  # short but identical sets
    assert jaccard_at_k([], [], 3) == 1.0 and overlap_at_k([], [], 3) == 1.0
    assert jaccard_at_k(["a"], [], 3) == 0.0
    with pytest.raises(ValueError):
        overlap_at_k(a, b, 0)


def test_rbo_identical_disjoint_and_prefix():
    assert rbo_ext(list("abcde"), list("abcde")) == pytest.approx(1.0)
    assert rbo_ext(list("abc"), list("xyz")) == 0.0
    # a list that is a prefix of the other extrapolates to full agreement (eq. 32)
    assert rbo_ext(list("ab"), list("abcd"), p=0.9) == pytest.approx(1.0)
    assert rbo_ext([], []) == 1.0 and rbo_ext(["a"], []) == 0.0


def test_rbo_swapping_the_top_two_costs_exactly_the_first_depth_weight():
    # X_1 = 0, X_d = d after: (1-p)/p * (p^2 + p^3 + p^4) + p^4 = p
    assert rbo_ext(list("abcd"), list("bacd"), p=0.9) == pytest.approx(0.9)
    assert rbo_ext(list("abcd"), list("bacd"), p=0.5) == pytest.approx(0.5)


def test_rbo_published_example():
    # b4ny4n/rankmeasures README (extrapolated RBO, p 0.9): 0.828.
    # By hand: X = 0, 1, 2, 4, 5 -> (1/9)(.5*.81 + 2/3*.729 + .6561 + .59049) + .59049
    value = rbo_ext([1, 2, 3, 4, 5], [2, 3, 4, 1, 5], p=0.9)
    assert value == pytest.approx(0.828, abs=5e-4)
    assert value == pytest.approx(1 / 9 * (0.405 + 0.486 + 0.6561 + 0.59049) + 0.59049)


def test_rbo_unequal_lengths_hand_computed_with_fractions():
    # S = [a, c] (s 2), L = [a, b, c] (l 3), p = 1/2. X_1 = 1, X_2 = 1, X_3 = 2.
    # sum1 = p*1 + p^2*1/2 + p^3*2/3 = 17/24; sum2 (d = 3) = X_s (3-2)/(2*3) p^3 = 1/48
    # (1-p)/p = 1; tail = ((2 - 1)/3 + 1/2) p^3 = 5/48; total = 34/48 + 1/48 + 5/48 = 5/6
    p = Fraction(1, 2)
    expected = (1 - p) / p * (p + p**2 / 2 + p**3 * Fraction(2, 3) + p**3 / 6) + Fraction(5, 6) * p**3
    assert expected == Fraction(5, 6)
    assert rbo_ext(["a", "c"], ["a", "b", "c"], p=0.5) == pytest.approx(5 / 6)
    assert rbo_ext(["a", "b", "c"], ["a", "c"], p=0.5) == pytest.approx(5 / 6)  # symmetric


def test_rbo_rejects_bad_p():
    for p in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError):
            rbo_ext(["a"], ["a"], p=p)


def test_kendall_tau_b_hand_values():
    # a b c d vs b a d c: pairs ab, cd discordant; the 4 others concordant -> (4-2)/6
    assert kendall_tau_b([1, 2, 3, 4], [2, 1, 4, 3]) == pytest.approx(1 / 3)
    assert kendall_tau_b([1, 2, 3], [1, 2, 3]) == 1.0
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0
    # with ties: C = 4, D = 0, n0 = 6, one pair tied in x, one in y -> 4 / sqrt(5 * 5)
    assert kendall_tau_b([1, 2, 2, 3], [1, 3, 2, 3]) == pytest.approx(0.8)
    assert kendall_tau_b([1], [1]) is None
    assert kendall_tau_b([1, 1], [1, 2]) is None
    with pytest.raises(ValueError):
        kendall_tau_b([1], [1, 2])


def test_kendall_tau_b_matches_scipy_when_installed():
    stats = pytest.importorskip("scipy.stats")
    x, y = [1, 2, 2, 3, 5, 4, 4], [2, 1, 3, 3, 4, 6, 5]
    assert kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic)


def test_rank_moves_mark_sides():
    assert rank_moves(["a", "b", "c"], ["c", "a", "d"]) == [
        RankMove("a", 1, 2, 1, "both"),
        RankMove("b", 2, None, None, "a_only"),
        RankMove("c", 3, 1, -2, "both"),
        RankMove("d", None, 3, None, "b_only"),
    ]


def test_compare_rankings_bundle():
    agreement = compare_rankings(["a", "b", "c", "d"], ["b", "a", "d", "c"], k=4)
    assert agreement.common == 4 and agreement.only_a == agreement.only_b == 0
    assert agreement.overlap == agreement.jaccard == 1.0
    assert agreement.kendall_tau_b == pytest.approx(1 / 3)
    agreement = compare_rankings(["a", "b", "x"], ["b", "a", "y"], k=2)
    assert agreement.k == 2 and agreement.rbo == pytest.approx(0.9)
    assert agreement.kendall_tau_b == -1.0
    assert compare_rankings([], []).to_dict()["rbo"] == 1.0
    assert compare_rankings(["a"], ["b"]).kendall_tau_b is None
