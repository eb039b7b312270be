"""Recorded sub-pipeline results fed to both Mongo server-side retrievers: ours
(``backends.mongo.retrieval.MongoRetrievalBackend``) and the engine's own
(``semvec.api.mongo_retrieval_backend.MongoRetrievalBackend``), over the same stubbed
collection: the mirror documents live in mongomock (a fake MongoDB, for the final read's
``find``), and ``aggregate`` answers each sub-pipeline from the scenario's recording (no
Atlas stages can run offline). Client-side fusion on both sides (the engine's probe would
write; the server path is pinned by shape elsewhere).

``python -m tests.support.mongo_engine_bed`` (engine importable) re-records
``tests/support/golden/mongo_engine.json``: each scenario's engine ranking, and the
pipelines the engine sends for ten input shapes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "golden" / "mongo_engine.json"
SESSION = "sess"
OTHER_SESSION = "other-sess"
COLLECTION = "semvec_memory_items"

# Item documents: id -> (owner, evicted, session, embedding, has unit)
DOCS: dict[str, tuple[Any, bool, str, tuple[float, ...], bool]] = {
    "a": ("t1", False, SESSION, (1.0, 0.0, 0.0), True),
    "b": ("t1", False, SESSION, (0.9, 0.1, 0.0), True),
    "c": ("t1", False, SESSION, (0.8, 0.0, 0.2), True),
    "d": ("t1", False, SESSION, (0.0, 1.0, 0.0), True),
    "e": ("t1", False, SESSION, (0.7, 0.7, 0.0), True),
    "f": ("t1", False, SESSION, (0.1, 0.1, 1.0), True),
    "x": ("t2", False, SESSION, (1.0, 0.05, 0.0), True),    # another owner, same session
    "y": ("t2", False, SESSION, (0.95, 0.0, 0.05), True),
    "gone": ("t1", True, SESSION, (1.0, 0.0, 0.01), True),  # evicted
    "far": ("t1", False, OTHER_SESSION, (1.0, 0.0, 0.0), True),  # foreign session
    "bare": ("t1", False, SESSION, (0.99, 0.0, 0.0), False),  # no unit: the engine drops it
}
# newer rows (later = more recent): 18 of the owner's, its newest "bnew", then 20 of
# another owner's, the most recent of all, which fill the engine's unfiltered recency
for _n in range(1, 19):
    DOCS[f"o{_n:02d}"] = ("t1", False, SESSION, (0.5, 0.5, _n / 100), True)
DOCS["bnew"] = ("t1", False, SESSION, (0.6, 0.4, 0.0), True)
for _n in range(1, 21):
    DOCS[f"z{_n:02d}"] = ("t2", False, SESSION, (0.0, 0.0, 1.0), True)


def doc_id(item: str) -> str:
    session = DOCS[item][2] if item in DOCS else SESSION
    return f"{session}:{item}"


def ids(*items: str) -> list[str]:
    return [doc_id(i) for i in items]


#: name -> (settings, recorded results per signal ("fail" = that sub-pipeline raises))
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "widths-top1": ({"top_k": 1}, {"semantic": ids("a", "b", "c"), "recency": ids("c", "b", "a")}),
    "ties-signal-order": ({"top_k": 3, "text": "q"},
                          {"semantic": ids("a", "d"), "recency": ids("b", "c"), "lexical": ids("b", "c")}),
    "duplicates-across-signals": ({"top_k": 4, "text": "q"},
                                  {"semantic": ids("a", "b", "c", "d"), "recency": ids("d", "c", "b", "a"),
                                   "lexical": ids("c", "a", "c")}),
    "stale-first-top1": ({"top_k": 1}, {"semantic": ids("gone", "far", "a", "b", "c"),
                                         "recency": ids("gone", "far", "c")}),
    "lagging-index-top3": ({"top_k": 3}, {"semantic": ["sess:ghost", "sess:gone", "other-sess:far",
                                                         "sess:a", "sess:b", "sess:c"],
                                           "recency": ["sess:ghost", "sess:a", "sess:b", "sess:c"]}),
    "fewer-than-top-k": ({"top_k": 5}, {"semantic": ids("a", "b"), "recency": ids("b")}),
    "empty-unit-dropped": ({"top_k": 2}, {"semantic": ids("bare", "a", "b"), "recency": ids("bare", "b")}),
    "failing-lexical": ({"top_k": 3, "text": "q"},
                        {"semantic": ids("a", "b", "c"), "recency": ids("c"), "lexical": "fail"}),
    "recency-other-owners": ({"top_k": 4, "owner": "t1"},
                             {"semantic": ids("a", "b", "c", "d"), "recency": ids("x", "y", "d", "c", "b", "a")}),
    "unscoped-other-owners": ({"top_k": 4}, {"semantic": ids("a", "x", "b", "y"),
                                             "recency": ids("y", "x", "d")}),
    "mmr": ({"top_k": 2, "mmr_fetch_k": 5}, {"semantic": ids("a", "b", "c", "e", "d"),
                                             "recency": ids("f", "e")}),
    "mmr-short-pool": ({"top_k": 3, "mmr_fetch_k": 6}, {"semantic": ids("a", "b"), "recency": ids("a")}),
    "mmr-lambda-0": ({"top_k": 3, "mmr_fetch_k": 6, "mmr_lambda": 0.0},
                     {"semantic": ids("a", "b", "c", "d", "e", "f"), "recency": ids("f")}),
    # recency run for real on the fake: unfiltered (the engine) the other owner's 20
    # newest rows take every recency rank; filtered, "bnew" would win (ENGINE-WIRE 7)
    "recency-defect-changes-result": ({"top_k": 1, "owner": "t1", "use_bm25": False},
                                      {"semantic": ids("a", "o01", "o02", "o03", "bnew"),
                                       "recency": "run"}),
    "bm25-off-ignores-text": ({"top_k": 3, "text": "q", "use_bm25": False},
                              {"semantic": ids("a", "b", "c"), "recency": ids("c", "b"),
                               "lexical": ids("c")}),
}

#: The ten input shapes whose pipelines must equal the engine's, as JSON.
SHAPES: dict[str, dict[str, Any]] = {
    "owner+text": {"owner": "t1", "text": "blue whale", "top_k": 5},
    "unscoped-no-text": {"top_k": 5},
    "bm25-off": {"owner": "t1", "text": "blue whale", "use_bm25": False, "top_k": 5},
    "defaults": {"text": "blue whale"},
    "mmr": {"owner": "t1", "text": "q", "top_k": 4, "mmr_fetch_k": 30},
    "reranker": {"owner": "t1", "text": "q", "top_k": 4, "reranker": True},
    "padded-text": {"owner": "t1", "text": "   blue   whale  ", "top_k": 5},
    "top_k-1": {"owner": "t1", "text": "q", "top_k": 1},
    "unowned-only": {"owner": None, "text": "q", "top_k": 5},
    "no-vector": {"owner": "t1", "text": "q", "top_k": 5, "vector": []},
}
QUERY = [1.0, 0.0, 0.0]


def unit_of(item: str) -> dict[str, Any]:
    """The ``unit`` payload of an item document (what the engine builds units from)."""
    owner, _evicted, _session, embedding, has_unit = DOCS[item]
    if not has_unit:
        return {}
    try:  # the engine's own unit dict when it is importable, so it can rebuild it
        import numpy as np
        from semvec._core import MemoryUnit

        unit = MemoryUnit(np.asarray(embedding, dtype=np.float64), f"text of {item}", 1.0)
        payload = unit.to_dict()
        payload["id"] = item
        return payload
    except ImportError:
        return {"id": item, "text": f"text of {item}", "embedding": list(embedding)}


def documents() -> list[dict[str, Any]]:
    from datetime import datetime, timezone

    out = []
    for n, (item, (owner, evicted, session, embedding, _has)) in enumerate(DOCS.items()):
        out.append({"_id": f"{session}:{item}", "session_id": session, "item_id": item,
                    "owner_subject": owner, "evicted": evicted, "text": f"text of {item}",
                    "embedding": list(embedding), "tier": "short_term", "tiers": ["short_term"],
                    "unit": unit_of(item),
                    "updated_at": datetime(2026, 1, 1, 0, n, tzinfo=timezone.utc)})
    return out


class StubCollection:
    """``aggregate`` from a recording (and every pipeline kept); ``find`` on mongomock."""

    def __init__(self, real: Any, results: dict[str, Any]):
        self._real = real
        self.results = results
        self.pipelines: list[list[dict[str, Any]]] = []
        self.database = real.database
        self.name = real.name

    def aggregate(self, pipeline, **_kw):
        self.pipelines.append(copy.deepcopy(pipeline))
        first = next(iter(pipeline[0]))
        if first == "$rankFusion":
            from pymongo.errors import OperationFailure

            raise OperationFailure("Unrecognized pipeline stage name: '$rankFusion'", code=40324)
        signal = {"$vectorSearch": "semantic", "$search": "lexical", "$match": "recency"}[first]
        recorded = self.results.get(signal, [])
        if recorded == "run":  # a plain $match/$sort pipeline: run it on the fake
            return iter(list(self._real.aggregate(pipeline)))
        if recorded == "fail":
            raise RuntimeError(f"{signal} index still building")
        by_id = {d["_id"]: d for d in self._real.find({})}
        return iter([{"_id": i, "unit": (by_id.get(i) or {}).get("unit") or {}} for i in recorded])

    def find(self, *args, **kwargs):
        return self._real.find(*args, **kwargs)


def _collection(results):
    import mongomock

    real = mongomock.MongoClient()["semvec"][COLLECTION]
    real.insert_many(documents())
    return StubCollection(real, results)


def our_context(settings: dict[str, Any]):
    from backends.contract import UNSCOPED, RetrievalContext

    owner = settings.get("owner", UNSCOPED)
    reranker = (lambda q, units: [0.0] * len(units)) if settings.get("reranker") else None
    vector = settings.get("vector", QUERY)
    return RetrievalContext(
        session_id=SESSION, query_embedding=tuple(vector) if vector else None,
        query_text=settings.get("text"), top_k=settings.get("top_k", 5), owner_subject=owner,
        use_bm25=settings.get("use_bm25", True), bm25_fetch_k=settings.get("bm25_fetch_k", 50),
        mmr_fetch_k=settings.get("mmr_fetch_k", 0), mmr_lambda=settings.get("mmr_lambda", 0.5),
        reranker=reranker)


def our_backend(results: dict[str, Any], *, corrected: bool = False):
    """Our retriever over a fresh stub (``backend._collection`` is the stub)."""
    from backends.mongo.retrieval import MongoRetrievalBackend

    col = _collection(results)

    class Mirror:
        collection = col

        def fetch_live(self, session_id, doc_ids, *, owner_subject):
            from backends.mongo.items import MongoItemMirror

            mirror = MongoItemMirror.__new__(MongoItemMirror)
            mirror._collection = col
            return MongoItemMirror.fetch_live(mirror, session_id, doc_ids,
                                              owner_subject=owner_subject)

    return MongoRetrievalBackend(Mirror(), force_client_rrf=True, recency_owner_filter=corrected)


def ours(settings: dict[str, Any], results: dict[str, Any], *, corrected: bool = False):
    """(item ids, pipelines sent) from our retriever on the stub."""
    backend = our_backend(results, corrected=corrected)
    got = [u.item_id for u in backend.search(our_context(settings))]
    return got, backend._collection.pipelines


def engine(settings: dict[str, Any], results: dict[str, Any]):
    """(item ids, pipelines sent) from the engine's retriever on the stub, driven with
    the context its session builds."""
    import asyncio
    import contextlib

    import numpy as np
    import semvec.api.mongo_retrieval_backend as engine_module
    from semvec.retrieval_backend import RetrievalContext
    from semvec.session import mmr_rerank

    col = _collection(results)

    class Client:
        def __getitem__(self, _db):
            return {COLLECTION: col}

    original = engine_module.mongo_client
    engine_module.mongo_client = lambda uri=None: Client()
    try:
        owner = settings.get("owner")  # the engine: a bound owner, or None (unscoped)
        backend = engine_module.MongoRetrievalBackend(
            session_id=SESSION, owner_subject=owner if isinstance(owner, str) else None,
            uri="mongodb://stub", db="semvec", force_client_rrf=True)
    finally:
        engine_module.mongo_client = original
    backend._index_ready = True  # no index provisioning against the stub

    @contextlib.contextmanager
    def stage(_name):
        yield {}

    vector = settings.get("vector", QUERY)
    reranker = (lambda q, units: list(units)) if settings.get("reranker") else None
    ctx = RetrievalContext(
        query_embedding=np.asarray(vector, dtype=np.float64), query_text=settings.get("text") or "",
        memory=None, top_k=settings.get("top_k", 5), mmr_fetch_k=settings.get("mmr_fetch_k", 0),
        mmr_lambda=settings.get("mmr_lambda", 0.5), bm25_fetch_k=settings.get("bm25_fetch_k", 50),
        rrf_k=None, rrf_weights=None, reranker=reranker,
        wants_bm25=settings.get("use_bm25", True), fuse_with_bm25=None, mmr_rerank=mmr_rerank,
        stage=stage)
    got = [u.id for u in asyncio.run(backend.search(ctx))]
    return got, col.pipelines


def record() -> None:
    rankings = {name: engine(settings, results)[0]
                for name, (settings, results) in SCENARIOS.items()}
    pipelines = {name: engine(settings, {})[1] for name, settings in SHAPES.items()}
    GOLDEN.write_text(json.dumps({
        "recorded_with": "semvec 0.8.9 semvec.api.mongo_retrieval_backend.MongoRetrievalBackend",
        "rankings": rankings, "pipelines": pipelines}, indent=1, sort_keys=True) + "\n",
        encoding="utf-8")


if __name__ == "__main__":
    record()
