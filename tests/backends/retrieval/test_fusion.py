"""Weighted reciprocal-rank fusion against hand-computed scores."""

from __future__ import annotations

import pytest

from backends.retrieval import MemoryUnit, rrf_fuse


def pairs(fused):
    return [(f.key, f.score) for f in fused]


def test_weighted_fusion_hand_computed():
    fused = rrf_fuse([["a", "b", "c"], ["c", "a", "d"]], [1.0, 0.5], k=60)
    expected = {
        "a": 1 / 61 + 0.5 / 62,  # .024458
        "c": 1 / 63 + 0.5 / 61,  # .024070
        "b": 1 / 62,             # .016129
        "d": 0.5 / 63,           # .007937
    }
    assert [f.key for f in fused] == ["a", "c", "b", "d"]
    for f in fused:
        assert f.score == pytest.approx(expected[f.key], abs=1e-15)
    assert fused[0].ranks == (1, 2) and fused[3].ranks == (None, 3)


def test_k_changes_scores_and_ties_break_by_id():
    fused = rrf_fuse([["b", "a"], ["a", "b"]], k=0)
    assert pairs(fused) == [("a", 1.5), ("b", 1.5)]
    fused = rrf_fuse([["b", "a"]], k=1)
    assert pairs(fused) == [("b", 0.5), ("a", 1 / 3)]


def test_duplicates_in_one_list_count_once_at_best_rank():
    fused = rrf_fuse([["a", "b", "a"]], k=1)
    assert pairs(fused) == [("a", 1 / 2), ("b", 1 / 3)]
    assert fused[0].ranks == (1,)


def test_zero_weight_list_adds_nothing_and_no_candidates():
    fused = rrf_fuse([["a", "b"], ["c", "a"]], [1.0, 0.0], k=60)
    assert pairs(fused) == [("a", 1 / 61), ("b", 1 / 62)]
    assert fused[0].ranks == (1, 2)


def test_default_key_reads_units_and_documents_and_keeps_first_object():
    u1 = MemoryUnit(item_id="x", text="first", score=0.3)
    u2 = MemoryUnit(item_id="x", text="second", score=0.9)
    fused = rrf_fuse([[u1], [u2, {"item_id": "y"}]], k=60)
    assert [f.key for f in fused] == ["x", "y"]
    assert fused[0].item is u1
    assert fused[1].item == {"item_id": "y"}


def test_limit_and_validation():
    assert [f.key for f in rrf_fuse([["a", "b", "c"]], limit=2)] == ["a", "b"]
    assert rrf_fuse([]) == []
    with pytest.raises(ValueError):
        rrf_fuse([["a"]], [1.0, 1.0])
    with pytest.raises(ValueError):
        rrf_fuse([["a"]], [-1.0])
    with pytest.raises(ValueError):
        rrf_fuse([["a"]], k=-1)
    with pytest.raises(TypeError):
        rrf_fuse([[object()]])
