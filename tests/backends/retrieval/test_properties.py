"""Properties that must hold for any input: fusion equals its formula, the metrics stay in
range and are symmetric where they should be, and the in-process ranking equals a naive
filter-then-sort reference."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from backends.contract import UNSCOPED, MemoryItem, RetrievalContext, owner_matches
from backends.retrieval import InProcessRetrievalBackend, rrf_fuse
from backends.retrieval.metrics import compare_rankings, jaccard_at_k, rbo_ext

IDS = st.sampled_from([f"i{k}" for k in range(12)])
RANKING = st.lists(IDS, max_size=10)


@given(st.lists(RANKING, min_size=1, max_size=4), st.data(), st.integers(0, 100))
def test_fusion_equals_its_formula(rankings, data, k):
    weights = data.draw(st.lists(st.sampled_from([0.0, 0.2, 0.5, 1.0, 2.0]),
                                 min_size=len(rankings), max_size=len(rankings)))
    fused = rrf_fuse(rankings, weights, k=k)
    expected: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights):
        best: dict[str, int] = {}
        for rank, item in enumerate(ranking, 1):
            best.setdefault(item, rank)
        for item, rank in best.items():
            if weight > 0:
                expected[item] = expected.get(item, 0.0) + weight / (k + rank)
    assert {f.key for f in fused} == set(expected)
    for f in fused:
        assert math.isclose(f.score, expected[f.key], rel_tol=1e-12)
    order = [(-f.score, f.key) for f in fused]
    assert order == sorted(order)


@given(RANKING, RANKING, st.floats(0.05, 0.95))
def test_rbo_and_jaccard_are_symmetric_and_bounded(a, b, p):
    assert 0.0 <= rbo_ext(a, b, p) <= 1.0 + 1e-12
    assert math.isclose(rbo_ext(a, b, p), rbo_ext(b, a, p), abs_tol=1e-12)
    assert math.isclose(rbo_ext(a, a, p), 1.0, abs_tol=1e-12)
    assert jaccard_at_k(a, b, 5) == jaccard_at_k(b, a, 5)
    agreement = compare_rankings(a, b, k=5)
    tau = agreement.kendall_tau_b
    assert tau is None or -1.0 <= tau <= 1.0


ITEM = st.builds(
    lambda k, x, y, owner, evicted: MemoryItem(f"i{k}", f"t{k}", (float(x), float(y)),
                                               owner_subject=owner, evicted=evicted),
    st.integers(0, 30), st.integers(-3, 3), st.integers(-3, 3),
    st.sampled_from([None, "t1", "t2"]), st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(ITEM, max_size=25), st.sampled_from([UNSCOPED, None, "t1"]),
       st.integers(1, 8), st.integers(-3, 3), st.integers(-3, 3))
def test_in_process_equals_filter_then_sort(items, owner, top_k, qx, qy):
    if qx == qy == 0:
        qx = 1
    seen: set[str] = set()
    live = []
    for item in items:
        if item.evicted or item.item_id in seen or not owner_matches(item.owner_subject, owner):
            continue
        seen.add(item.item_id)
        live.append(item)

    def cosine(item):
        x, y = item.embedding
        norm = math.hypot(x, y) or 1.0
        return (x * qx + y * qy) / (norm * math.hypot(qx, qy))

    got = InProcessRetrievalBackend().search(RetrievalContext(
        session_id="s", memory=tuple(items), owner_subject=owner, top_k=top_k,
        query_embedding=(float(qx), float(qy))))
    # float32 scores: compare with a tolerance, and check it is a valid top-k
    by_id = {i.item_id: i for i in live}
    assert len(got) == min(top_k, len(live))
    assert all(u.item_id in by_id for u in got)  # filtered before top-k
    for unit in got:
        assert math.isclose(unit.score, cosine(by_id[unit.item_id]), abs_tol=1e-5)
    position = {i.item_id: n for n, i in enumerate(live)}  # no tiers: source order
    for first, second in zip(got, got[1:]):
        # ties in document order
        assert (first.score, -position[first.item_id]) >= (second.score, -position[second.item_id])
    if got:
        returned = {u.item_id for u in got}
        floor = min(u.score for u in got)
        assert all(cosine(i) <= floor + 1e-5 for i in live if i.item_id not in returned)
