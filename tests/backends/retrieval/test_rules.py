"""The shared rules: fetch_width / narrowing_stage over their whole truth table, and the
narrowing stages (rerank, MMR worked example, slice)."""

from __future__ import annotations

import pytest

from backends.retrieval import (
    MemoryUnit,
    RetrievalContext,
    apply_narrowing,
    fetch_width,
    mmr_select,
    narrowing_stage,
)


def _reranker(query, units):
    return [0.0 for _ in units]


def ctx(**kw) -> RetrievalContext:
    return RetrievalContext(session_id="s", **kw)


# (reranker, use_bm25, top_k, bm25_fetch_k, mmr_fetch_k) -> (width, stage)
TRUTH_TABLE = [
    # no reranker, BM25 off: mmr_fetch_k below / equal / above top_k
    (False, False, 5, 20, 0, 5, "slice"),
    (False, False, 5, 20, 3, 5, "slice"),
    (False, False, 5, 20, 5, 5, "slice"),
    (False, False, 5, 20, 12, 12, "mmr"),
    # no reranker, BM25 on: at least bm25_fetch_k
    (False, True, 5, 20, 0, 20, "slice"),
    (False, True, 5, 20, 5, 20, "slice"),
    (False, True, 5, 20, 12, 20, "mmr"),
    (False, True, 5, 20, 30, 30, "mmr"),
    (False, True, 25, 20, 0, 25, "slice"),
    (False, True, 5, 0, 0, 5, "slice"),
    (False, True, 25, 20, 30, 30, "mmr"),
    # reranker: max of the three, whether BM25 is on or off, MMR never runs
    (True, False, 5, 20, 0, 20, "rerank"),
    (True, False, 5, 20, 30, 30, "rerank"),
    (True, False, 40, 20, 30, 40, "rerank"),
    (True, False, 5, 0, 0, 5, "rerank"),
    (True, True, 5, 20, 0, 20, "rerank"),
    (True, True, 5, 20, 30, 30, "rerank"),
    (True, True, 40, 20, 30, 40, "rerank"),
]


@pytest.mark.parametrize("rerank,bm25,top_k,bm25_k,mmr_k,width,stage", TRUTH_TABLE)
def test_truth_table(rerank, bm25, top_k, bm25_k, mmr_k, width, stage):
    c = ctx(
        reranker=_reranker if rerank else None,
        use_bm25=bm25,
        top_k=top_k,
        bm25_fetch_k=bm25_k,
        mmr_fetch_k=mmr_k,
    )
    assert fetch_width(c) == width
    assert narrowing_stage(c) == stage
    assert fetch_width(c) >= top_k


def test_bm25_width_does_not_depend_on_query_text():
    assert fetch_width(ctx(use_bm25=True, query_text=None)) == 50  # the engine's default bm25_fetch_k (ENGINE-WIRE §8)


@pytest.mark.parametrize(
    "kw", [{"top_k": 0}, {"top_k": -1}, {"mmr_fetch_k": -1}, {"bm25_fetch_k": -2}, {"top_k": 2.5}]
)
def test_invalid_contexts_are_refused(kw):
    with pytest.raises(ValueError):
        fetch_width(ctx(**kw))
    with pytest.raises(ValueError):
        narrowing_stage(ctx(**kw))


def unit(item_id, emb, score=0.0):
    return MemoryUnit(item_id=item_id, text=item_id, score=score, embedding=emb)


# Worked example, query (1, 0); cosines to the query: a .96, b .8, c .6, d 0.
# Pairwise: cos(a,b) .936, cos(a,c) .352, cos(b,c) 0, cos(a,d) .28, cos(b,d) .6, cos(c,d) -.8
WORKED = [
    unit("a", (0.96, 0.28), 0.96),
    unit("b", (0.8, 0.6), 0.8),
    unit("c", (0.6, -0.8), 0.6),
    unit("d", (0.0, 1.0), 0.0),
]


def test_mmr_worked_example_balanced():
    # step 1: .5*rel -> a (.48). step 2: b .4-.468=-.068, c .3-.176=.124, d 0-.14 -> c.
    # step 3: b -.068 (max sim .936), d -.14 (max sim .28) -> b.
    picked = mmr_select(WORKED, (1.0, 0.0), top_k=3, lambda_=0.5)
    assert [u.item_id for u in picked] == ["a", "c", "b"]


def test_mmr_lambda_one_is_pure_relevance_and_zero_is_pure_diversity():
    assert [u.item_id for u in mmr_select(WORKED, (1.0, 0.0), top_k=3, lambda_=1.0)] == [
        "a", "b", "c"]
    # lambda 0: step 1 all tie at 0 -> smallest id a; step 2 -> d (-.14 beats c -.176);
    # step 3: b -.468 vs c -.176 -> c
    assert [u.item_id for u in mmr_select(WORKED, (1.0, 0.0), top_k=3, lambda_=0.0)] == [
        "a", "d", "c"]


def test_mmr_scale_invariant_and_text_only_uses_scores():
    scaled = [unit(u.item_id, tuple(3 * x for x in u.embedding), u.score) for u in WORKED]
    assert [u.item_id for u in mmr_select(scaled, (5.0, 0.0), top_k=3)] == ["a", "c", "b"]
    # no query embedding: relevance = the candidate's score (same numbers here)
    assert [u.item_id for u in mmr_select(WORKED, None, top_k=3)] == ["a", "c", "b"]


def test_mmr_without_embeddings_degrades_to_slice():
    pool = [unit("x", None, 2.0), unit("y", (1.0, 0.0), 1.0)]
    assert [u.item_id for u in mmr_select(pool, (1.0, 0.0), top_k=1)] == ["x"]


def test_mmr_dimension_mismatch_is_an_error():
    with pytest.raises(ValueError):
        mmr_select(WORKED, (1.0, 0.0, 0.0), top_k=2)


def test_apply_narrowing_runs_exactly_the_chosen_stage():
    seen = []
    out = apply_narrowing(
        ctx(top_k=2, query_embedding=(1.0, 0.0), mmr_fetch_k=4),
        WORKED,
        emit=lambda stage, payload: seen.append((stage, payload)),
    )
    assert [u.item_id for u in out] == ["a", "c"]
    assert seen == [("mmr", {"in": 4, "out": 2, "items": ["a", "c"]})]

    out = apply_narrowing(ctx(top_k=2), WORKED)
    assert [u.item_id for u in out] == ["a", "b"]


def test_reranker_reorders_and_keeps_previous_score():
    calls = []

    def rerank(query, units):
        calls.append((query, [u.item_id for u in units]))
        return [{"a": 0.1, "b": 0.9, "c": 0.9, "d": 0.5}[u.item_id] for u in units]

    out = apply_narrowing(ctx(top_k=3, reranker=rerank, query_text="hello", mmr_fetch_k=9), WORKED)
    assert calls == [("hello", ["a", "b", "c", "d"])]
    assert [(u.item_id, u.score) for u in out] == [("b", 0.9), ("c", 0.9), ("d", 0.5)]
    assert out[0].meta["pre_rerank_score"] == 0.8


def test_reranker_returning_wrong_count_is_an_error():
    with pytest.raises(ValueError):
        apply_narrowing(ctx(reranker=lambda q, u: [1.0]), WORKED)
