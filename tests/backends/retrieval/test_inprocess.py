"""The in-process pipeline: filters before top-k, deterministic ties, BM25, fusion,
narrowing, tracing and the per-list cache."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from backends.contract import UNSCOPED
from backends.retrieval import (
    InProcessRetrievalBackend,
    MemoryItem,
    RetrievalContext,
    fetch_width,
)


def item(item_id, emb, text="", **kw):
    return MemoryItem(item_id=item_id, text=text or item_id, embedding=emb, **kw)


def ids(units):
    return [u.item_id for u in units]


def search(memory, **kw):
    kw.setdefault("session_id", "s1")
    return InProcessRetrievalBackend().search(RetrievalContext(memory=memory, **kw))


def test_cosine_order_and_scores():
    mem = (item("a", (1.0, 0.0)), item("b", (0.6, 0.8)), item("c", (0.0, 2.0)))
    out = search(mem, query_embedding=(3.0, 0.0), top_k=3)
    assert ids(out) == ["a", "b", "c"]
    assert [u.score for u in out] == pytest.approx([1.0, 0.6, 0.0], abs=1e-6)
    # the score says what it is: tier-weighted cosine (no tier: short_term, weight 1.0)
    assert out[0].meta == {"score_kind": "tier-weighted cosine", "dense_rank": 1,
                           "dense_score": pytest.approx(1.0), "cosine": pytest.approx(1.0),
                           "tier_weight": 1.0}


def test_evicted_foreign_session_and_owner_filtered_before_top_k():
    mem = [
        item("top", (1.0, 0.0), owner_subject="t2"),
        item("gone", (1.0, 0.0), owner_subject="t1", evicted=True),
        item("other", (1.0, 0.0), owner_subject="t1", session_id="s2"),
        item("mine", (0.0, 1.0), owner_subject="t1", session_id="s1"),
        item("unowned", (0.5, 0.5)),
    ]
    q = dict(query_embedding=(1.0, 0.0), top_k=1)
    assert ids(search(mem, owner_subject="t1", **q)) == ["mine"]
    assert ids(search(mem, owner_subject=None, **q)) == ["unowned"]
    assert ids(search(mem, owner_subject=UNSCOPED, **q)) == ["top"]
    assert ids(search(mem, owner_subject="t3", **q)) == []
    with pytest.raises(ValueError):
        search(mem, owner_subject="", **q)


def test_ties_keep_document_order_even_at_the_cut():
    # The engine's order among exact cosine ties is unspecified (it varies from run to
    # run); ours is the engine's document order, so it is at least deterministic.
    mem = tuple(item(name, (1.0, 1.0)) for name in ["e", "b", "d", "a", "c"]) + (
        item("z", (2.0, 2.0 + 1e-3)),)
    out = search(mem, query_embedding=(1.0, 1.0), top_k=3)
    assert ids(out) == ["e", "b", "d"]  # z is slightly off-axis: below the exact ties
    assert ids(search(mem, query_embedding=(1.0, 1.0), top_k=6))[-1] == "z"


def test_matches_a_float64_reference_on_random_data():
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(500, 16))
    mem = tuple(item(f"i{k:03d}", tuple(v)) for k, v in enumerate(vecs))
    q = rng.normal(size=16)
    ref = (vecs / np.linalg.norm(vecs, axis=1)[:, None]) @ (q / np.linalg.norm(q))
    expected = [f"i{k:03d}" for k in np.argsort(-ref)[:10]]
    out = search(mem, query_embedding=tuple(q), top_k=10)
    assert ids(out) == expected
    assert [u.score for u in out] == pytest.approx(sorted(ref, reverse=True)[:10], abs=1e-5)


def test_bm25_only_query_and_fusion_hand_computed():
    mem = (
        item("a", (1.0, 0.0), "apples and pears"),
        item("b", (0.8, 0.6), "zebra crossing"),
        item("c", (0.0, 1.0), "zebra zebra"),
    )
    out = search(mem, query_text="zebra", use_bm25=True, top_k=3)
    assert ids(out) == ["c", "b"]  # text-only: BM25 ranking, no dense signal
    # dense: a, b, c. bm25 (as the engine calls bm25s, k documents even when fewer
    # match): c, b, then a at score 0, which still counts in the fusion. weights (1, 2), k 10.
    out = search(mem, query_embedding=(1.0, 0.0), query_text="zebra", use_bm25=True,
                 top_k=3, rrf_k=10, rrf_weights=(1.0, 2.0))
    expected = {"c": 1 / 13 + 2 / 11, "b": 1 / 12 + 2 / 12, "a": 1 / 11 + 2 / 13}
    assert ids(out) == ["c", "b", "a"]
    assert [u.score for u in out] == pytest.approx([expected[i] for i in ids(out)])
    assert out[0].meta["bm25_rank"] == 1 and out[0].meta["dense_rank"] == 3
    assert out[2].meta["bm25_rank"] == 3 and out[2].meta["bm25_score"] == 0.0


def test_without_fusion_bm25_only_widens_the_pool():
    # distinct texts: units sharing an 80-character prefix would be one candidate
    mem = (item("a", (1.0, 0.0), "x one"), item("b", (0.9, 0.1), "x two"),
           item("c", (0.0, 1.0), "rare"))
    kw = dict(query_embedding=(1.0, 0.0), query_text="rare", use_bm25=True, fuse_with_bm25=False)
    assert ids(search(mem, top_k=2, **kw)) == ["a", "b"]
    ctx = RetrievalContext(session_id="s1", memory=mem, top_k=2, bm25_fetch_k=1,
                           reranker=lambda q, units: [1.0 if u.text == q else 0.0 for u in units],
                           **kw)
    assert fetch_width(ctx) == 2
    assert ids(InProcessRetrievalBackend().search(ctx))[0] == "c"  # the reranker saw it


def test_bm25_off_ignores_text_and_no_signal_is_an_error():
    mem = (item("a", (1.0, 0.0), "zebra"), item("b", (0.0, 1.0), "zebra zebra"))
    assert ids(search(mem, query_embedding=(1.0, 0.0), query_text="zebra", top_k=1)) == ["a"]
    with pytest.raises(ValueError):
        search(mem, query_text="zebra", top_k=1)
    with pytest.raises(ValueError):
        search(mem, query_embedding=(1.0, 0.0, 0.0))


def test_mmr_and_trace_stages():
    mem = (item("a", (0.96, 0.28)), item("b", (0.8, 0.6)), item("c", (0.6, -0.8)),
           item("d", (0.0, 1.0)))
    trace = []
    out = search(mem, query_embedding=(1.0, 0.0), top_k=2, mmr_fetch_k=4,
                 stage=lambda name, payload: trace.append((name, payload)))
    assert ids(out) == ["a", "c"]
    assert [name for name, _ in trace] == ["retrieve", "mmr"]
    assert trace[0][1]["dense"] == ["a", "b", "c", "d"]

    trace.clear()
    search(mem, query_embedding=(1.0, 0.0), query_text="a", use_bm25=True, top_k=1,
           stage=lambda name, payload: trace.append(name))
    assert trace == ["retrieve", "fuse", "slice"]


def test_empty_and_missing_memory():
    assert search((), query_embedding=(1.0,)) == []
    assert search(None, query_embedding=(1.0,)) == []
    assert search((item("x", None, "hello"),), query_embedding=(1.0, 0.0)) == []


def test_cache_reuses_tuples_and_never_serves_a_mutated_list_stale():
    backend = InProcessRetrievalBackend()
    mem = [item("a", (1.0, 0.0)), item("b", (0.0, 1.0))]
    ctx = RetrievalContext(session_id="s1", memory=mem, query_embedding=(1.0, 0.0), top_k=1)
    assert ids(backend.search(ctx)) == ["a"]
    mem[0] = item("a", (0.0, 1.0))  # same list, an item replaced in place
    mem.append(item("c", (1.0, 0.1)))
    assert ids(backend.search(ctx)) == ["c"]
    frozen = tuple(mem)
    ctx.memory = frozen
    backend.search(ctx)
    assert len(backend._cache) == 2
    backend.search(ctx)
    assert len(backend._cache) == 2


def test_identity_and_importing_the_package_stays_numpy_free():
    backend = InProcessRetrievalBackend()
    assert backend.name == "in-process" and backend.inert_fields == frozenset()
    code = ("import sys, backends.retrieval, backends.retrieval.rules, "
            "backends.retrieval.fusion; print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
