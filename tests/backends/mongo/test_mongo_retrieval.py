"""Mongo server-side retrieval: exact pipeline shapes, $rankFusion probing and fallback,
client-side fusion on recorded sub-pipeline results, and the consistent read.

Atlas stages ($vectorSearch, $search, $rankFusion) cannot run in-process, so their
pipelines are asserted for exact shape and their results are recorded; the mirror
documents and the consistent read run on ``mongomock`` (a fake).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from tests.support.fixtures.mongo import db_name, make_adapter, mongo_client  # noqa: F401

from backends.contract import MemoryItem, RetrievalBackend, RetrievalContext


@pytest.fixture
def session() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def adapter(make_adapter):
    return make_adapter(item_sync=True)


class Recorder:
    """Stands in for ``collection.aggregate``: records every pipeline and answers from
    recorded sub-pipeline results keyed by the first stage."""

    def __init__(self, results=None, rank_fusion=None, fail_rank_fusion_query=False):
        self.pipelines: list[list[dict]] = []
        self.results = results or {}
        self.rank_fusion = rank_fusion  # list of docs, or None: stage unknown
        self.fail_query = fail_rank_fusion_query

    def __call__(self, pipeline, **kwargs):
        from pymongo.errors import OperationFailure

        self.pipelines.append(pipeline)
        first = next(iter(pipeline[0]))
        if first == "$rankFusion":
            if self.rank_fusion is None:
                raise OperationFailure("Unrecognized pipeline stage name: '$rankFusion'", code=40324)
            if self.fail_query and "probe" not in pipeline[0]["$rankFusion"]["input"]["pipelines"]:
                raise OperationFailure("$rankFusion input must be a ranked pipeline", code=9)
            return iter(self.rank_fusion)
        signal = {"$vectorSearch": "semantic", "$search": "lexical", "$match": "recency"}[first]
        return iter({"_id": i} for i in self.results.get(signal, []))

    def of(self, first_stage):
        return [p for p in self.pipelines if first_stage in p[0]]


def install(backend, monkeypatch, recorder):
    monkeypatch.setattr(backend._collection, "aggregate", recorder)
    return recorder


def items(*ids, **kw):
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    # a non-empty unit: the engine's final read drops rows without one
    return [MemoryItem(i, f"text of {i}", embedding=(1.0, float(n)), unit={"text": f"text of {i}"},
                       updated_at=base + timedelta(minutes=n), **kw)
            for n, i in enumerate(ids)]


# -- declaration -----------------------------------------------------------------------


def test_declared_in_code(adapter, make_adapter):
    from backends.mongo.retrieval import MongoRetrievalBackend

    backend = adapter.server_retriever()
    assert isinstance(backend, RetrievalBackend) and isinstance(backend, MongoRetrievalBackend)
    assert backend is adapter.server_retriever()
    assert backend.name == "mongo-server (as the engine ranks)"
    assert backend.corrected().name == "mongo-server (corrected: recency filtered by owner)"
    assert backend.signals == ("semantic", "lexical", "recency")
    assert backend.inert_fields == frozenset({"rrf_k", "rrf_weights", "fuse_with_bm25", "memory", "stage"})
    assert dict(backend.DEFAULT_WEIGHTS) == {"semantic": 0.5, "lexical": 0.3, "recency": 0.2}
    assert make_adapter().server_retriever() is None  # mirror off: in-process retrieval
    assert set(backend.inert_fields) <= set(RetrievalContext.__dataclass_fields__)


# -- exact pipeline shapes -------------------------------------------------------------


@pytest.mark.parametrize("owner, clause", [
    # unowned rows (ours; the engine cannot ask): null (ours) or "" (the engine's encoding)
    (None, {"$or": [{"owner_subject": {"$eq": None}}, {"owner_subject": {"$eq": ""}}]}),
    ("t1/agent", {"owner_subject": "t1/agent"}),  # the engine's filter document
])
def test_vector_search_stage(owner, clause):
    from backends.mongo.retrieval import sub_pipelines

    ctx = RetrievalContext(session_id="s1", query_embedding=[0.1, 0.2], top_k=5, owner_subject=owner)
    assert sub_pipelines(ctx, 10)["semantic"] == [{
        "$vectorSearch": {
            "index": "semvec_items_vec",
            "path": "embedding",
            "queryVector": [0.1, 0.2],
            "numCandidates": 100,
            "limit": 10,
            "filter": {"session_id": "s1", "evicted": False, **clause},
        }
    }]


def test_unscoped_has_no_owner_clause_and_num_candidates_scales():
    from backends.mongo.retrieval import sub_pipelines

    ctx = RetrievalContext(session_id="s1", query_embedding=[1.0], top_k=5)
    stage = sub_pipelines(ctx, 40)["semantic"][0]["$vectorSearch"]
    assert stage["numCandidates"] == 400 and stage["limit"] == 40
    assert stage["filter"] == {"session_id": "s1", "evicted": False}


def test_search_compound_stage_and_recency():
    from backends.mongo.retrieval import sub_pipelines

    ctx = RetrievalContext(session_id="s1", query_embedding=[1.0], query_text="  blue whale ",
                           use_bm25=True, owner_subject="t1")
    pipelines = sub_pipelines(ctx, 40)
    assert list(pipelines) == ["semantic", "recency", "lexical"]  # the engine's order
    assert pipelines["lexical"] == [
        {"$search": {
            "index": "semvec_items_lex",
            "compound": {
                "must": [{"text": {"query": "blue whale", "path": "text"}}],
                "filter": [
                    {"equals": {"path": "session_id", "value": "s1"}},
                    {"equals": {"path": "evicted", "value": False}},
                    {"equals": {"path": "owner_subject", "value": "t1"}},
                ],
            },
        }},
        {"$limit": 40},
    ]
    # as the engine sends it: recency has no owner filter (its defect, ENGINE-WIRE 7)
    assert pipelines["recency"] == [
        {"$match": {"session_id": "s1", "evicted": False}},
        {"$sort": {"updated_at": -1, "_id": 1}},
        {"$limit": 40},
    ]
    corrected = sub_pipelines(ctx, 40, recency_owner_filter=True)["recency"]
    assert corrected[0] == {"$match": {"session_id": "s1", "evicted": False, "owner_subject": "t1"}}


@pytest.mark.parametrize("use_bm25, text, expected", [
    (False, "words", ["semantic", "recency"]),
    (True, None, ["semantic", "recency"]),
    (True, "   ", ["semantic", "recency"]),
    (True, "words", ["semantic", "recency", "lexical"]),
])
def test_lexical_only_with_bm25_and_text(use_bm25, text, expected):
    from backends.mongo.retrieval import sub_pipelines

    ctx = RetrievalContext(session_id="s", query_embedding=[1.0], query_text=text, use_bm25=use_bm25)
    assert list(sub_pipelines(ctx, 10)) == expected


def test_rank_fusion_pipeline_shape():
    from backends.mongo.retrieval import rank_fusion_pipeline, sub_pipelines

    ctx = RetrievalContext(session_id="s", query_embedding=[1.0], query_text="q", use_bm25=True)
    subs = sub_pipelines(ctx, 20)
    assert rank_fusion_pipeline(subs, 20) == [
        {"$rankFusion": {
            "input": {"pipelines": {"semantic": subs["semantic"], "recency": subs["recency"],
                                    "lexical": subs["lexical"]}},
            "combination": {"weights": {"semantic": 0.5, "recency": 0.2, "lexical": 0.3}},
        }},
        {"$limit": 20},
        {"$project": {"_id": 1, "unit": 1}},
    ]
    no_text = sub_pipelines(RetrievalContext(session_id="s", query_embedding=[1.0]), 20)
    assert rank_fusion_pipeline(no_text, 20)[0]["$rankFusion"]["combination"] == {
        "weights": {"semantic": 0.5, "recency": 0.2}}


@pytest.mark.parametrize("kw, fetch_k, limit", [
    (dict(top_k=5), 5, 20),
    (dict(top_k=10), 10, 30),
    (dict(top_k=5, mmr_fetch_k=30), 30, 30),
    (dict(top_k=5, use_bm25=True, bm25_fetch_k=25), 25, 25),
    (dict(top_k=1), 1, 20),
])
def test_widths_are_the_engines(kw, fetch_k, limit):
    """fetch_k = max(fetch_width, top_k); sub_limit = max(fetch_k, 3 top_k, 20)."""
    from backends.mongo.retrieval import fetch_k_of, sub_limit, sub_pipelines

    ctx = RetrievalContext(session_id="s", query_embedding=[1.0], **kw)
    assert fetch_k_of(ctx) == fetch_k and sub_limit(ctx) == limit
    stage = sub_pipelines(ctx)["semantic"][0]["$vectorSearch"]
    assert stage["limit"] == limit and stage["numCandidates"] == max(10 * limit, 100)


# -- fusion paths ----------------------------------------------------------------------


def test_client_side_fusion_on_recorded_results(adapter, session, monkeypatch):
    adapter.sync_items(session, items("a", "b", "c", "d"))
    backend = adapter.server_retriever()
    ids = {x: f"{session}:{x}" for x in "abcd"}
    rec = install(backend, monkeypatch, Recorder(results={
        "semantic": [ids["a"], ids["b"], ids["c"]],
        "lexical": [ids["c"], ids["a"]],
        "recency": [ids["d"], ids["c"], ids["b"], ids["a"]],
    }))
    ctx = RetrievalContext(session_id=session, query_embedding=[1.0, 0.0], query_text="x",
                           use_bm25=True, top_k=4)
    units = backend.search(ctx)
    k = 60
    expected = {
        "a": 0.5 / (k + 1) + 0.3 / (k + 2) + 0.2 / (k + 4),
        "b": 0.5 / (k + 2) + 0.2 / (k + 3),
        "c": 0.5 / (k + 3) + 0.3 / (k + 1) + 0.2 / (k + 2),
        "d": 0.2 / (k + 1),
    }
    assert [u.item_id for u in units] == sorted(expected, key=lambda x: -expected[x])
    for unit in units:
        assert unit.score == pytest.approx(expected[unit.item_id])
        assert unit.meta["fusion"] == "client"
    assert next(u for u in units if u.item_id == "a").meta["ranks"] == {
        "semantic": 1, "recency": 4, "lexical": 2}
    # the probe ran once; each sub-pipeline ran with the engine's projection appended
    assert len(rec.of("$rankFusion")) == 1
    assert rec.of("$vectorSearch")[0][-1] == {"$project": {"_id": 1, "unit": 1}}
    assert len(rec.pipelines) == 4


def test_without_query_text_semantic_and_recency_only(adapter, session, monkeypatch):
    adapter.sync_items(session, items("a", "b"))
    backend = adapter.server_retriever()
    rec = install(backend, monkeypatch, Recorder(results={
        "semantic": [f"{session}:a", f"{session}:b"], "recency": [f"{session}:b", f"{session}:a"]}))
    units = backend.search(RetrievalContext(session_id=session, query_embedding=[1.0, 0.0],
                                            use_bm25=True, top_k=2))
    assert rec.of("$search") == []
    k = 60
    a, b = 0.5 / (k + 1) + 0.2 / (k + 2), 0.5 / (k + 2) + 0.2 / (k + 1)
    assert [(u.item_id, pytest.approx(u.score)) for u in units] == [("a", a), ("b", b)]


def test_consistent_read_drops_stale_evicted_and_foreign(adapter, session, monkeypatch):
    other = f"s-{uuid.uuid4().hex[:8]}"
    adapter.sync_items(session, items("a", "b", "c"), owner_subject="t1")
    adapter.sync_items(session, items("a", "b"), owner_subject="t1")  # c soft-evicted
    adapter.sync_items(other, items("x"), owner_subject="t1")
    backend = adapter.server_retriever()
    install(backend, monkeypatch, Recorder(results={
        # what a lagging search index might still return:
        "semantic": [f"{session}:c", f"{other}:x", f"{session}:ghost", f"{session}:a"],
        "recency": [f"{session}:b", f"{session}:c"],
    }))
    units = backend.search(RetrievalContext(session_id=session, query_embedding=[1.0, 0.0],
                                            top_k=5, owner_subject="t1"))
    assert [u.item_id for u in units] == ["a", "b"]  # 0.5/(60+4) > 0.2/(60+1)
    assert all(u.session_id == session and u.owner_subject == "t1" for u in units)
    # a different owner sees nothing, even if the index hands back ids
    assert backend.search(RetrievalContext(session_id=session, query_embedding=[1.0, 0.0],
                                           top_k=5, owner_subject="t2")) == []


def test_rank_fusion_used_when_probe_succeeds(adapter, session, monkeypatch):
    adapter.sync_items(session, items("a", "b", "c"))
    backend = adapter.server_retriever()
    rec = install(backend, monkeypatch, Recorder(rank_fusion=[
        {"_id": f"{session}:c", "score": 0.9}, {"_id": f"{session}:a", "score": 0.5}]))
    ctx = RetrievalContext(session_id=session, query_embedding=[1.0, 0.0], top_k=2)
    units = backend.search(ctx)
    assert [(u.item_id, u.score) for u in units] == [("c", 0.9), ("a", 0.5)]
    assert units[0].meta["fusion"] == "server"
    backend.search(ctx)
    fusion = rec.of("$rankFusion")
    assert len(fusion) == 3  # one probe, two queries: the probe result is cached
    assert "probe" in fusion[0][0]["$rankFusion"]["input"]["pipelines"]
    assert rec.of("$vectorSearch") == [] and rec.of("$match") == []


def test_query_time_failure_falls_back_for_good(adapter, session, monkeypatch):
    adapter.sync_items(session, items("a", "b"))
    backend = adapter.server_retriever()
    rec = install(backend, monkeypatch, Recorder(
        rank_fusion=[], fail_rank_fusion_query=True,
        results={"semantic": [f"{session}:a"], "recency": [f"{session}:b"]}))
    ctx = RetrievalContext(session_id=session, query_embedding=[1.0, 0.0], top_k=2)
    assert [u.meta["fusion"] for u in backend.search(ctx)] == ["client", "client"]
    backend.search(ctx)
    assert len(rec.of("$rankFusion")) == 2  # probe + the one failing query, never again
    assert backend.detect_rank_fusion() is False


def test_forced_client_rrf_never_probes(make_adapter, session, monkeypatch):
    adapter = make_adapter(item_sync=True, force_client_rrf=True)
    adapter.sync_items(session, items("a"))
    backend = adapter.server_retriever()
    rec = install(backend, monkeypatch, Recorder(rank_fusion=[], results={"recency": [f"{session}:a"]}))
    backend.search(RetrievalContext(session_id=session, top_k=1))
    assert rec.of("$rankFusion") == []


def test_probe_on_mongomock_says_no(adapter):
    assert adapter.server_retriever().detect_rank_fusion() is False


# -- narrowing is the shared stage --------------------------------------------------


def test_shared_narrowing_stage_applies(adapter, session, monkeypatch):
    adapter.sync_items(session, items("a", "b", "c", "d", "e", "f"))
    backend = adapter.server_retriever()
    order = [f"{session}:{x}" for x in "abcdef"]
    install(backend, monkeypatch, Recorder(results={"semantic": order, "recency": order}))
    sliced = backend.search(RetrievalContext(session_id=session, query_embedding=[1.0, 0.0], top_k=2))
    assert [u.item_id for u in sliced] == ["a", "b"]

    seen = []

    def reranker(query, units):
        seen.append([u.item_id for u in units])
        return [float(i) for i in range(len(units))]  # reverses the order

    reranked = backend.search(RetrievalContext(session_id=session, query_embedding=[1.0, 0.0],
                                               top_k=2, reranker=reranker, query_text="q"))
    assert len(seen[0]) == 6 and [u.item_id for u in reranked] == ["f", "e"]
    mmr = backend.search(RetrievalContext(session_id=session, query_embedding=[1.0, 0.0],
                                          top_k=3, mmr_fetch_k=6))
    assert len(mmr) == 3


def test_inert_fields_really_are_ignored(adapter, session, monkeypatch):
    adapter.sync_items(session, items("a", "b", "c"))
    backend = adapter.server_retriever()
    order = [f"{session}:{x}" for x in "abc"]
    install(backend, monkeypatch, Recorder(results={"semantic": order, "recency": order[::-1]}))
    base = dict(session_id=session, query_embedding=[1.0, 0.0], top_k=3)
    plain = backend.search(RetrievalContext(**base))
    calls = []
    tweaked = backend.search(RetrievalContext(
        **base, rrf_k=1, rrf_weights=(0.0, 9.0), fuse_with_bm25=False,
        memory=[MemoryItem("zzz", "live only")], stage=lambda *a: calls.append(a)))
    assert [(u.item_id, u.score) for u in plain] == [(u.item_id, u.score) for u in tweaked]
    assert calls == []


def test_no_atlas_search_is_a_refusal_with_advice(adapter, session):
    """On a deployment without Atlas Search (here: mongomock) search refuses plainly."""
    from backends.errors import UnsupportedOperation

    adapter.sync_items(session, items("a"))
    with pytest.raises(UnsupportedOperation, match="SEMVEC_MONGO_ITEM_SYNC off") as info:
        adapter.server_retriever().search(RetrievalContext(session_id=session,
                                                            query_embedding=[1.0, 0.0]))
    assert info.value.__cause__ is not None


def test_server_without_vector_search_stage_refuses(adapter, session, monkeypatch):
    from pymongo.errors import OperationFailure

    from backends.errors import UnsupportedOperation

    backend = adapter.server_retriever()

    def aggregate(pipeline, **kwargs):
        raise OperationFailure("Unrecognized pipeline stage name: '$vectorSearch'", code=40324)

    monkeypatch.setattr(backend._collection, "aggregate", aggregate)
    with pytest.raises(UnsupportedOperation):
        backend.search(RetrievalContext(session_id=session, query_embedding=[1.0, 0.0]))


def test_purge_items_removes_the_mirror_rows(adapter, session):
    adapter.sync_items(session, items("a", "b"))
    assert adapter.purge_items(session) == 2
    assert list(adapter.iter_live_items(session)) == []


# -- exact side (retrieve diff --exact) --------------------------------------------------


def test_exact_semantic_pipeline_shape():
    """The exact side reads the rows $vectorSearch would filter to, with a plain $match."""
    from backends.mongo.retrieval import exact_semantic_pipeline

    ctx = RetrievalContext(session_id="s1", query_embedding=[1.0, 0.0], owner_subject="t1")
    assert exact_semantic_pipeline(ctx) == [
        {"$match": {"session_id": "s1", "evicted": False, "owner_subject": "t1"}},
        {"$project": {"_id": 1, "embedding": 1}},
    ]
    unscoped = RetrievalContext(session_id="s1", query_embedding=[1.0, 0.0])
    assert exact_semantic_pipeline(unscoped)[0] == {"$match": {"session_id": "s1", "evicted": False}}


def test_exact_search_ranks_the_mirror_in_process(adapter, session, monkeypatch):
    """On mongomock (a fake MongoDB: no $vectorSearch): the exact side never sends
    $vectorSearch, ranks the live in-scope rows by cosine, and fuses that with the same
    recency pipeline and client-side RRF the server side uses."""
    from backends.mongo.retrieval import fuse_client_side

    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    unit = {"text": "x"}
    mine = [MemoryItem("far", "x", embedding=(-1.0, 0.0), unit=unit, updated_at=base + timedelta(minutes=5)),
            MemoryItem("near", "x", embedding=(1.0, 0.1), unit=unit, updated_at=base),
            MemoryItem("mid", "x", embedding=(0.5, 0.5), unit=unit, updated_at=base + timedelta(minutes=1)),
            MemoryItem("gone", "x", embedding=(1.0, 0.0), unit=unit, updated_at=base + timedelta(minutes=9))]
    adapter.sync_items(session, mine, owner_subject="t1")
    adapter.sync_items(session, mine[:3], owner_subject="t1")  # "gone" is evicted
    adapter.sync_items(f"{session}-other", [MemoryItem("near", "x", embedding=(1.0, 0.0))],
                       owner_subject="t2")
    backend = adapter.server_retriever()
    real = backend._collection.aggregate
    sent = []

    def spy(pipeline, **kwargs):
        sent.append(pipeline)
        return real(pipeline, **kwargs)

    monkeypatch.setattr(backend._collection, "aggregate", spy)
    ctx = RetrievalContext(session_id=session, query_embedding=(1.0, 0.0), top_k=3,
                           owner_subject="t1")
    got = backend.exact_search(ctx)
    assert not any("$vectorSearch" in p[0] for p in sent)
    ids = {x: f"{session}:{x}" for x in ("near", "mid", "far")}
    expected = fuse_client_side({"semantic": [ids["near"], ids["mid"], ids["far"]],
                                 "recency": [ids["far"], ids["mid"], ids["near"]]})
    assert [u.item_id for u in got] == [doc_id.split(":", 1)[1] for doc_id, _, _ in expected][:3]
    assert {u.item_id for u in got} == {"near", "mid", "far"}
    assert got[0].meta["ranks"]["semantic"] == 1 and got[0].meta["fusion"] == "exact"
