"""Each step of the in-process pipeline (ENGINE-WIRE section 8) as its own function, and
the narrowing rules both sides share, against hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest

from backends.contract import MemoryItem, MemoryUnit, RetrievalContext
from backends.retrieval.inprocess import (
    InProcessRetrievalBackend,
    bm25_documents,
    bm25_hits,
    cosine_candidates,
    document_order,
    embedding_key,
    fuse_candidates,
    text_prefix,
    tier_weight,
)
from backends.retrieval.rules import apply_narrowing, mmr_select


def it(item_id, text="t", emb=(1.0, 0.0), **kw):
    return MemoryItem(item_id=item_id, text=text, embedding=emb, **kw)


def test_tier_weight_takes_the_best_tier():
    assert tier_weight(it("a", tier="long_term")) == 0.9
    assert tier_weight(it("a", tier="long_term", tiers=("medium_term", "long_term"))) == 0.95
    assert tier_weight(it("a")) == 1.0  # no tier: short_term
    assert tier_weight(it("a", tier="working")) == 1.0  # a tier the engine has no weight for


def test_text_prefix_is_exact_and_80_characters():
    assert text_prefix("x" * 100) == "x" * 80
    assert text_prefix("Ab ") != text_prefix("ab ") and text_prefix("a b") != text_prefix("a  b")
    assert text_prefix(None) == ""


def test_embedding_key_is_the_vector_itself():
    assert embedding_key(it("a", emb=(1.0, 2.0))) == embedding_key(it("b", emb=(1.0, 2.0)))
    assert embedding_key(it("a", emb=(1.0, 2.0))) != embedding_key(it("a", emb=(1.0, 2.0 + 1e-12)))
    assert embedding_key(it("a", emb=None)) != embedding_key(it("b", emb=None))


def test_document_order_is_tier_by_tier_with_repeats_and_positions():
    items = [it("l1", tier="long_term"), it("s1", tier="short_term"),
             it("both", tier="long_term", tiers=("short_term", "long_term")),
             it("m1", tier="medium_term"), it("s0", tier="short_term", positions={"short_term": 0}),
             it("none")]
    ids = [items[i].item_id for i in document_order(items)]
    # short: s0 (recorded position) first, then source order; medium; long; "both" twice
    assert ids == ["s0", "s1", "both", "none", "m1", "l1", "both"]


def test_cosine_candidates_dedupe_by_prefix_before_the_cut():
    cosine = np.array([0.9, 0.8, 0.7, 0.6])
    weights = np.array([1.0, 1.0, 1.0, 0.9])
    texts = ["p" * 80 + "A", "p" * 80 + "B", "other", "p" * 79]
    got = cosine_candidates(cosine, weights, texts, [0, 1, 2, 3], 2)
    assert [row for row, _, _ in got] == [0, 2]  # row 1 shares row 0's prefix: next one fills in
    assert got[0][1:] == (pytest.approx(0.9), pytest.approx(0.9))
    wider = cosine_candidates(cosine, weights, texts, [0, 1, 2, 3], 10)
    assert [(row, round(w, 2)) for row, w, _ in wider] == [(0, 0.9), (2, 0.7), (3, 0.54)]
    # equal weighted scores: document order decides
    tied = cosine_candidates(np.array([0.5, 0.5]), np.array([1.0, 1.0]), ["a", "b"], [1, 0], 2)
    assert [row for row, _, _ in tied] == [1, 0]


def test_bm25_documents_skip_empty_texts_and_hits_always_fill_k():
    items = [it("a", "zebra crossing"), it("b", ""), it("c", "apples"), it("d", "zebra zebra")]
    docs = bm25_documents(items, [0, 1, 2, 3, 0])
    assert docs == [0, 2, 3, 0]  # "b" skipped, "a" twice
    from backends.retrieval.bm25 import BM25Index

    index = BM25Index([items[i].text for i in docs])
    hits = bm25_hits(index, "zebra", 50)
    assert len(hits) == 4  # min(k, documents), zero scores included
    assert hits[-1][1] == 0.0 and docs[hits[-1][0]] == 2
    assert len(bm25_hits(index, "zebra", 2)) == 2


def test_fusion_ties_keep_insertion_order_and_repeats_take_ranks():
    fused = fuse_candidates(["a", "b"], ["b", "a"], (1.0, 1.0), 60)
    assert [k for k, _ in fused] == ["a", "b"]  # equal scores: the cosine list's order
    fused = fuse_candidates(["a", "b"], ["c", "c", "d"], (1.0, 1.0), 0)
    assert dict(fused)["d"] == pytest.approx(1 / 3)  # the repeat of c took rank 2
    assert [k for k, _ in fuse_candidates(["a"], ["z"], (0.0, 1.0), 60)] == ["z"]


def test_no_cut_before_narrowing_and_the_rrf_env(monkeypatch):
    mem = tuple(it(f"i{n}", f"doc {n} zebra" if n % 2 else f"doc {n}", (1.0, n / 10))
                for n in range(12))
    seen = []

    def reranker(q, units):
        seen.append(len(units))
        return [0.0] * len(units)

    ctx = RetrievalContext(session_id="s", memory=mem, query_embedding=(1.0, 0.0),
                           query_text="zebra", use_bm25=True, bm25_fetch_k=12, top_k=2,
                           reranker=reranker)
    InProcessRetrievalBackend().search(ctx)
    assert seen == [12]  # the whole fused list reached the reranker
    base = dict(session_id="s", memory=mem, query_embedding=(1.0, 0.0), query_text="zebra",
                use_bm25=True, top_k=3)
    default = InProcessRetrievalBackend().search(RetrievalContext(**base))
    monkeypatch.setenv("SEMVEC_RRF_K", "1")
    monkeypatch.setenv("SEMVEC_RRF_WEIGHTS", "0.1,1.0")
    from_env = InProcessRetrievalBackend().search(RetrievalContext(**base))
    assert from_env[0].score == pytest.approx(0.1 / (1 + from_env[0].meta["dense_rank"])
                                              + 1.0 / (1 + from_env[0].meta["bm25_rank"]))
    assert [u.item_id for u in from_env] != [u.item_id for u in default]
    caller = InProcessRetrievalBackend().search(RetrievalContext(**base, rrf_k=60,
                                                                 rrf_weights=(1.0, 1.0)))
    assert [u.item_id for u in caller] == [u.item_id for u in default]  # the caller wins


def unit(item_id, emb, score=0.0):
    return MemoryUnit(item_id=item_id, text=item_id, score=score, embedding=emb)


def test_mmr_short_pool_first_pick_and_ties():
    pool = [unit("b", (0.0, 1.0)), unit("a", (1.0, 0.0))]
    assert [u.item_id for u in mmr_select(pool, (1.0, 0.0), top_k=2)] == ["b", "a"]  # unchanged
    three = [unit("x", (0.6, 0.8)), unit("y", (1.0, 0.0)), unit("z", (1.0, 0.0))]
    # lambda 0: the first pick is still the most relevant; then pure diversity
    assert [u.item_id for u in mmr_select(three, (1.0, 0.0), top_k=2, lambda_=0.0)] == ["y", "x"]
    # exact ties go to the first in the pool
    assert mmr_select([unit("p", (1.0, 0.0)), unit("q", (1.0, 0.0)), unit("r", (0.0, 1.0))],
                      (1.0, 0.0), top_k=1)[0].item_id == "p"


def test_reranker_ties_keep_the_pool_order():
    pool = [unit("c", (1.0, 0.0), 0.3), unit("a", (1.0, 0.0), 0.2), unit("b", (1.0, 0.0), 0.1)]
    ctx = RetrievalContext(session_id="s", top_k=3, reranker=lambda q, units: [1.0, 2.0, 1.0])
    got = apply_narrowing(ctx, pool)
    assert [u.item_id for u in got] == ["a", "c", "b"]
    assert got[0].meta["score_kind"] == "reranker" and got[0].meta["pre_rerank_score"] == 0.2
