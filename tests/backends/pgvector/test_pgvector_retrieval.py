"""Server-side retrieval in SQL on a real PostgreSQL + pgvector.

Filters (session, owner, not evicted) must apply before the top-k, so a tenant never sees
another's items and a small session still gets k results out of a large table.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone

import pytest

from backends.contract import UNSCOPED, MemoryItem, RetrievalBackend, RetrievalContext

pytestmark = pytest.mark.postgres

DIMS = 8
BASE = datetime(2025, 1, 1, tzinfo=timezone.utc)


def vec(rng: random.Random) -> tuple[float, ...]:
    return tuple(rng.uniform(-1, 1) for _ in range(DIMS))


def items_for(n: int, seed: int = 1, prefix: str = "i", words=None) -> list[MemoryItem]:
    rng = random.Random(seed)
    words = words or ["alpha", "beta", "gamma", "delta", "omega"]
    return [
        MemoryItem(
            item_id=f"{prefix}{k:04d}",
            text=f"{rng.choice(words)} {rng.choice(words)} note {k}",
            embedding=vec(rng),
            updated_at=BASE + timedelta(minutes=k),
        )
        for k in range(n)
    ]


def cosine_distance(a, b) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return 1 - dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.fixture
def adapter(pgvector_adapter_factory):
    return pgvector_adapter_factory(dimensions=DIMS)


def test_retriever_declares_itself(adapter):
    backend = adapter.server_retriever()
    assert isinstance(backend, RetrievalBackend)
    assert backend.name == "pgvector-server"
    assert backend.signals == ("semantic", "lexical", "recency")
    assert isinstance(backend.inert_fields, frozenset)
    assert backend.inert_fields <= set(RetrievalContext.__dataclass_fields__)
    assert "rrf_k" not in backend.inert_fields and "stage" not in backend.inert_fields


def test_two_tenants_with_identical_content_never_see_each_other(adapter):
    same = items_for(30, seed=7)
    adapter.sync_items("tenant-a-session", same, owner_subject="tenant-a")
    adapter.sync_items("tenant-b-session", same, owner_subject="tenant-b")
    query = same[3].embedding
    for session, owner in (("tenant-a-session", "tenant-a"), ("tenant-b-session", "tenant-b")):
        ctx = RetrievalContext(session_id=session, query_embedding=query, query_text="alpha",
                               use_bm25=True, top_k=10, owner_subject=owner)
        got = adapter.server_retriever().search(ctx)
        assert len(got) == 10
        assert {u.session_id for u in got} == {session}
        assert {u.owner_subject for u in got} == {owner}
    # the right session with the wrong owner finds nothing
    wrong = RetrievalContext(session_id="tenant-a-session", query_embedding=query, top_k=10,
                             owner_subject="tenant-b")
    assert adapter.server_retriever().search(wrong) == []


def test_owner_filter_is_three_state_within_one_session(adapter):
    content = items_for(6, seed=3)
    adapter.sync_items("shared", content, owner_subject="acme")
    # a second writer mirrors the same content under other ids with no owner
    with adapter._db.connection() as conn:  # direct insert: sync owns the whole session
        conn.execute(
            "INSERT INTO semvec_memory_items (session_id, item_id, owner_subject, embedding, text,"
            " updated_at) SELECT session_id, 'u-' || item_id, NULL, embedding, text, updated_at"
            " FROM semvec_memory_items WHERE session_id = 'shared'"
        )
    search = adapter.server_retriever().search
    q = content[0].embedding
    acme = search(RetrievalContext(session_id="shared", query_embedding=q, top_k=20,
                                   owner_subject="acme"))
    none = search(RetrievalContext(session_id="shared", query_embedding=q, top_k=20,
                                   owner_subject=None))
    both = search(RetrievalContext(session_id="shared", query_embedding=q, top_k=20,
                                   owner_subject=UNSCOPED))
    assert len(acme) == 6 and {u.owner_subject for u in acme} == {"acme"}
    assert len(none) == 6 and {u.owner_subject for u in none} == {None}
    assert len(both) == 12


@pytest.mark.parametrize("mode", ["hnsw", "auto", "exact"])
def test_a_tiny_session_in_a_big_table_still_gets_k_results(pgvector_adapter_factory, mode):
    adapter = pgvector_adapter_factory(dimensions=DIMS, search_mode=mode)
    adapter.ensure_schema()
    rng = random.Random(11)
    target = items_for(25, seed=5, prefix="t")
    # a crowd of other sessions sitting right next to the query vector
    q = target[0].embedding
    with adapter._db.connection(typed=True) as conn:
        from pgvector import Vector

        rows = []
        for n in range(4000):
            near = [x + rng.uniform(-0.01, 0.01) for x in q]
            rows.append((f"crowd-{n % 40}", f"c{n}", Vector(near), "alpha crowd"))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO semvec_memory_items (session_id, item_id, embedding, text)"
                " VALUES (%s, %s, %s, %s)", rows)
    adapter.ensure_indexes()  # the HNSW index exists, so the planner may use it
    with adapter._db.connection() as conn:
        conn.execute("ANALYZE semvec_memory_items")
    adapter.sync_items("target", target)
    ctx = RetrievalContext(session_id="target", query_embedding=q, top_k=10)
    got = adapter.server_retriever().search(ctx)
    assert len(got) == 10
    assert {u.session_id for u in got} == {"target"}
    assert adapter.server_retriever().last_plan == ("hnsw" if mode == "hnsw" else "exact")
    # semantic ranks agree with exact cosine order over the session's items
    exact = sorted(target, key=lambda it: (cosine_distance(it.embedding, q), it.item_id))
    sem_ranked = sorted((u for u in got if "semantic" in u.meta["ranks"]),
                        key=lambda u: u.meta["ranks"]["semantic"])
    assert [u.item_id for u in sem_ranked][:5] == [it.item_id for it in exact][:5]


def test_evicted_items_are_never_returned(adapter):
    content = items_for(12, seed=2)
    adapter.sync_items("s", content)
    adapter.sync_items("s", content[:4])  # the rest are soft-evicted
    got = adapter.server_retriever().search(
        RetrievalContext(session_id="s", query_embedding=content[8].embedding, top_k=10))
    assert {u.item_id for u in got} == {it.item_id for it in content[:4]}


def test_fusion_matches_the_shared_rrf_over_semantic_and_recency(adapter):
    from backends.retrieval import rrf_fuse
    from backends.pgvector.retrieval import DEFAULT_WEIGHTS

    content = items_for(40, seed=9)
    adapter.sync_items("s", content)
    q = vec(random.Random(99))
    ctx = RetrievalContext(session_id="s", query_embedding=q, top_k=8, rrf_k=30)
    got = adapter.server_retriever().search(ctx)
    from backends.pgvector.retrieval import candidate_pool

    pool = candidate_pool(8)  # each signal ranks the pool, not just the top k (issue 15.5)
    semantic = sorted(content, key=lambda it: (cosine_distance(it.embedding, q), it.item_id))[:pool]
    recency = sorted(content, key=lambda it: it.updated_at, reverse=True)[:pool]
    expected = rrf_fuse([semantic, recency],
                        [DEFAULT_WEIGHTS["semantic"], DEFAULT_WEIGHTS["recency"]], k=30)
    assert [u.item_id for u in got] == [f.key for f in expected][:8]
    for unit, fused in zip(got, expected):
        assert unit.score == pytest.approx(fused.score, rel=1e-6)


def test_lexical_signal_rescues_a_rare_token_only_when_bm25_is_on(adapter):
    content = items_for(60, seed=4)
    rare = MemoryItem(item_id="rare", text="the zyxwvut protocol handshake",
                      embedding=tuple([-1.0] * DIMS), updated_at=BASE + timedelta(days=1))
    adapter.sync_items("s", [*content, rare])
    q = tuple([1.0] * DIMS)  # semantically the opposite of the rare (but newest) item
    search = adapter.server_retriever().search
    on = search(RetrievalContext(session_id="s", query_embedding=q, query_text="zyxwvut handshake?",
                                 use_bm25=True, top_k=10))
    off = search(RetrievalContext(session_id="s", query_embedding=q, query_text="zyxwvut handshake?",
                                  use_bm25=False, top_k=10))
    assert "rare" in [u.item_id for u in on]
    assert on[[u.item_id for u in on].index("rare")].meta["ranks"]["lexical"] == 1
    assert "rare" not in [u.item_id for u in off]
    assert all("lexical" not in u.meta["ranks"] for u in off)


def test_text_only_and_recency_only_queries(adapter):
    content = items_for(10, seed=8, words=["apple"])
    adapter.sync_items("s", content)
    search = adapter.server_retriever().search
    recent = search(RetrievalContext(session_id="s", top_k=3))
    assert [u.item_id for u in recent] == ["i0009", "i0008", "i0007"]
    text_only = search(RetrievalContext(session_id="s", query_text="note 4", use_bm25=True,
                                        top_k=3, bm25_fetch_k=5))
    assert text_only[0].item_id == "i0004"


def test_shared_narrowing_stage_runs_mmr_and_reranker(adapter):
    content = items_for(30, seed=6)
    adapter.sync_items("s", content)
    search = adapter.server_retriever().search
    q = content[0].embedding
    mmr = search(RetrievalContext(session_id="s", query_embedding=q, top_k=4, mmr_fetch_k=12))
    assert len(mmr) == 4 and all(u.embedding is not None for u in mmr)
    reranked = search(RetrievalContext(
        session_id="s", query_embedding=q, query_text="x", top_k=3,
        reranker=lambda text, units: [-ord(u.item_id[-1]) for u in units]))
    assert len(reranked) == 3
    assert all("pre_rerank_score" in u.meta for u in reranked)
    assert all(u.embedding is not None for u in reranked)  # a reranker may compare vectors
    # a plain slice never looks at the vectors, so none is sent back (or decoded)
    sliced = search(RetrievalContext(session_id="s", query_embedding=q, top_k=4))
    assert len(sliced) == 4 and all(u.embedding is None for u in sliced)


def test_stage_callback_sees_retrieve_fuse_and_narrowing(adapter):
    adapter.sync_items("s", items_for(5))
    seen = []
    adapter.server_retriever().search(RetrievalContext(
        session_id="s", query_embedding=items_for(1)[0].embedding, top_k=2,
        stage=lambda name, payload: seen.append(name)))
    assert seen == ["retrieve", "fuse", "slice"]


def test_wrong_query_dimension_is_refused(adapter):
    adapter.sync_items("s", items_for(3))
    with pytest.raises(ValueError, match="dimensions"):
        adapter.server_retriever().search(
            RetrievalContext(session_id="s", query_embedding=(1.0, 2.0)))


def test_search_on_an_unprovisioned_database_is_empty(adapter):
    assert adapter.server_retriever().search(
        RetrievalContext(session_id="s", query_embedding=tuple([0.1] * DIMS))) == []


def test_why_iterative_scan_is_on_a_filtered_hnsw_scan_shrinks_without_it(pgvector_adapter_factory):
    """Pins the pgvector behaviour the HNSW plan relies on: with the index forced, a
    selective session filter returns fewer than k rows unless iterative scan is on."""
    from pgvector import Vector

    adapter = pgvector_adapter_factory(dimensions=DIMS)
    adapter.ensure_schema()
    rng = random.Random(3)
    q = vec(rng)
    with adapter._db.connection(typed=True) as conn:
        rows = [("crowd", f"c{n}", Vector([x + rng.uniform(-0.01, 0.01) for x in q]), "x")
                for n in range(3000)]
        rows += [("small", f"s{n}", Vector(list(vec(rng))), "y") for n in range(30)]
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO semvec_memory_items (session_id, item_id, embedding, text)"
                            " VALUES (%s, %s, %s, %s)", rows)
    adapter.ensure_indexes()
    with adapter._db.connection(typed=True) as conn:
        conn.execute("ANALYZE semvec_memory_items")
        counts = {}
        for setting in ("off", "relaxed_order"):
            with conn.transaction():
                conn.execute(f"SET LOCAL hnsw.iterative_scan = {setting}")
                conn.execute("SET LOCAL enable_sort = off")  # make the planner take HNSW
                plan = "\n".join(r[0] for r in conn.execute(
                    "EXPLAIN SELECT item_id FROM semvec_memory_items WHERE session_id = 'small'"
                    " ORDER BY embedding <=> %s LIMIT 10", (Vector(list(q)),)))
                assert "semvec_items_vec" in plan
                counts[setting] = len(conn.execute(
                    "SELECT item_id FROM semvec_memory_items WHERE session_id = 'small'"
                    " ORDER BY embedding <=> %s LIMIT 10", (Vector(list(q)),)).fetchall())
    assert counts["off"] < 10 and counts["relaxed_order"] == 10


@pytest.mark.parametrize("version, ok", [("0.8.0", True), ("0.8.6", True), ("1.0", True),
                                         ("0.7.4", False), ("0.5.1", False), (None, False)])
def test_iterative_scan_needs_pgvector_0_8(version, ok):
    from backends.pgvector.retrieval import supports_iterative_scan

    assert supports_iterative_scan(version) is ok


def _prefix_cases():
    from hypothesis import strategies as st

    return st.tuples(st.integers(2, 24), st.integers(0, 10_000), st.booleans(),
                     st.sampled_from(["alpha", "beta gamma", "zzz"]))


def test_server_top_k_is_a_prefix_of_the_top_k_plus_one(pgvector_adapter_factory):
    """Issue 15.5: with pools covering the session, the fused order does not depend on k.
    (Before, each signal's pool was cut at k: at k=1 only the newest item had a recency
    rank, and the --like item moved between first and fourth as k grew.)"""
    from hypothesis import HealthCheck, given, settings

    adapter = pgvector_adapter_factory(dimensions=DIMS)
    retriever = adapter.server_retriever()
    counter = iter(range(10**6))

    @settings(max_examples=25, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(_prefix_cases())
    def check(case):
        n, seed, bm25, text = case
        sid = f"prefix-{next(counter)}"
        items = items_for(n, seed=seed)
        adapter.sync_items(sid, items)
        query = items[seed % n].embedding  # like --like: the item's own vector
        ranked = {}
        for k in range(1, n + 1):
            ranked[k] = [u.item_id for u in retriever.search(RetrievalContext(
                sid, query_embedding=query, query_text=text, use_bm25=bm25, bm25_fetch_k=0,
                top_k=k))]
            assert len(ranked[k]) == k
        for k in range(1, n):
            assert ranked[k] == ranked[k + 1][:k], (k, ranked[k], ranked[k + 1])

    check()


def test_in_process_top_k_is_prefix_stable_when_pools_are_not_truncated():
    """The same property for the in-process retriever, whose semantic pool is the fetch
    width: untruncated once the width covers the session (here through bm25_fetch_k)."""
    from backends.retrieval import InProcessRetrievalBackend

    items = items_for(15, seed=3)
    query = items[7].embedding
    ranked = {}
    for k in range(1, 16):
        ctx = RetrievalContext("s", query_embedding=query, query_text="alpha", use_bm25=True,
                               bm25_fetch_k=15, top_k=k, memory=items)
        ranked[k] = [u.item_id for u in InProcessRetrievalBackend().search(ctx)]
    for k in range(1, 15):
        assert ranked[k] == ranked[k + 1][:k]


def test_exact_search_against_hnsw_on_the_same_store(pgvector_adapter_factory):
    """retrieve diff --exact on pgvector: exact_search is the same fused search with the
    semantic signal computed over every live row (the HNSW index cannot serve it), so it
    equals a brute-force computation even when the retriever is forced onto HNSW; the
    HNSW side is then measured against it."""
    from backends.pgvector.retrieval import CANDIDATE_POOL, DEFAULT_WEIGHTS
    from backends.retrieval import rrf_fuse
    from backends.retrieval.metrics import recall_at_k

    adapter = pgvector_adapter_factory(dimensions=DIMS, search_mode="hnsw")
    content = items_for(400, seed=21)
    adapter.sync_items("big", content, owner_subject="acme")
    adapter.sync_items("other", items_for(200, seed=22, prefix="o"), owner_subject="acme")
    adapter.ensure_indexes()
    with adapter._db.connection() as conn:
        conn.execute("ANALYZE semvec_memory_items")
    backend = adapter.server_retriever()
    q = vec(random.Random(5))
    ctx = RetrievalContext(session_id="big", owner_subject="acme", query_embedding=q, top_k=10)

    approx = backend.search(ctx)
    assert backend.last_plan == "hnsw" and len(approx) == 10
    exact = backend.exact_search(ctx)
    assert backend.last_plan == "exact"
    semantic = sorted(content, key=lambda it: (cosine_distance(it.embedding, q), it.item_id))
    recency = sorted(content, key=lambda it: it.updated_at, reverse=True)
    expected = rrf_fuse([semantic[:CANDIDATE_POOL], recency[:CANDIDATE_POOL]],
                        [DEFAULT_WEIGHTS["semantic"], DEFAULT_WEIGHTS["recency"]], k=ctx.rrf_k)
    assert [u.item_id for u in exact] == [f.key for f in expected][:10]
    # the semantic signal alone, both plans, against brute force
    truth = [it.item_id for it in semantic[:10]]
    assert backend.semantic_ranking(ctx, 10, exact=True) == truth
    assert recall_at_k(backend.semantic_ranking(ctx, 10), truth, 10) >= 0.8
    # the exact plan can never read the ANN index, even when the planner is told to
    # avoid every other path (whether the HNSW plan uses it is the planner's cost call)
    from backends.postgres.state import owner_clause

    owner_sql, owner_params = owner_clause("acme")
    sql, params = backend._statement(["semantic", "recency"], "exact", 10, CANDIDATE_POOL,
                                     ctx, owner_sql, owner_params, list(q), "")
    with adapter._db.connection(typed=True) as conn, conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_sort = off")
        shown = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))
    assert "semvec_items_vec" not in shown, shown


def test_auto_plan_is_decided_in_the_statement_and_remembered(pgvector_adapter_factory):
    """A big session goes to HNSW and a small one to the exact plan without a separate
    size query; the decision is remembered per session (and forgotten after the window)."""
    adapter = pgvector_adapter_factory(dimensions=DIMS, exact_search_limit=50)
    adapter.sync_items("big", items_for(120, seed=31))
    adapter.sync_items("small", items_for(20, seed=32))
    backend = adapter.server_retriever()
    q = vec(random.Random(1))
    for session, plan in (("big", "hnsw"), ("small", "exact"), ("big", "hnsw")):
        got = backend.search(RetrievalContext(session_id=session, query_embedding=q, top_k=5))
        assert len(got) == 5 and backend.last_plan == plan
    adapter.sync_items("big", items_for(30, seed=31))  # shrinks below the limit (90 evicted)
    backend._plans = type(backend._plans)(0.0)  # the window passed
    backend.search(RetrievalContext(session_id="big", query_embedding=q, top_k=5))
    assert backend.last_plan == "exact"
