"""Server-side retrieval over the item mirror (``semvec_memory_items``).

Three signals, each a sub-pipeline filtered to one session's live, in-scope items
BEFORE top-k: semantic (``$vectorSearch``), lexical (``$search``, only when BM25 is
wanted and there is query text) and recency (``$sort`` on ``updated_at``). They are
fused with fixed weights by ``$rankFusion`` when a probe says the server has it, else
client-side with the shared ``rrf_fuse``. Search indexes are eventually consistent, so
one consistent read then drops anything stale, evicted or foreign, and the shared
narrowing stage has the last word. Width and narrowing come from
``backends.retrieval``; nothing here re-decides them.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping, Sequence

from backends.contract import MemoryUnit, RetrievalContext
from backends.errors import UnsupportedOperation
from backends.mongo.errors import driver_errors, is_no_atlas_search
from backends.mongo.names import LEXICAL_SEARCH_INDEX, VECTOR_SEARCH_INDEX
from backends.mongo.state import owner_clause
from backends.retrieval import apply_narrowing, fetch_width, rrf_fuse, wants_lexical
from backends.retrieval.fusion import DEFAULT_RRF_K, SERVER_SIGNAL_WEIGHTS

log = logging.getLogger("backends.mongo")

#: The shared server-side split (``backends.retrieval.fusion``).
DEFAULT_WEIGHTS: Mapping[str, float] = SERVER_SIGNAL_WEIGHTS

#: Sub-pipelines fetch this many times the shared fetch width: the consistent read may
#: drop rows a lagging search index still returns, and narrowing must not run short.
WIDEN_FACTOR = 2


def widened_limit(ctx: RetrievalContext) -> int:
    return fetch_width(ctx) * WIDEN_FACTOR


def num_candidates(limit: int) -> int:
    return max(10 * limit, 100)


def _owner_values(ctx: RetrievalContext) -> list[Any] | None:
    """The stored owner values a search may return (None: unscoped). Unowned rows carry
    null (ours) or ``""`` (the engine's encoding), so "unowned only" accepts both."""
    clause = owner_clause(ctx.owner_subject)
    if not clause:
        return None
    return [None, ""] if ctx.owner_subject is None else [ctx.owner_subject]


def vector_stage(ctx: RetrievalContext, limit: int) -> dict[str, Any]:
    clauses: list[dict[str, Any]] = [{"session_id": {"$eq": ctx.session_id}},
                                     {"evicted": {"$eq": False}}]
    owners = _owner_values(ctx)
    if owners is not None:
        eqs = [{"owner_subject": {"$eq": value}} for value in owners]
        clauses.append(eqs[0] if len(eqs) == 1 else {"$or": eqs})
    return {
        "$vectorSearch": {
            "index": VECTOR_SEARCH_INDEX,
            "path": "embedding",
            "queryVector": [float(x) for x in ctx.query_embedding or ()],
            "numCandidates": num_candidates(limit),
            "limit": limit,
            "filter": {"$and": clauses},
        }
    }


def search_stage(ctx: RetrievalContext) -> dict[str, Any]:
    filters: list[dict[str, Any]] = [
        {"equals": {"path": "session_id", "value": ctx.session_id}},
        {"equals": {"path": "evicted", "value": False}},
    ]
    owners = _owner_values(ctx)
    if owners is not None:
        eqs = [{"equals": {"path": "owner_subject", "value": value}} for value in owners]
        filters.append(eqs[0] if len(eqs) == 1 else
                       {"compound": {"should": eqs, "minimumShouldMatch": 1}})
    return {
        "$search": {
            "index": LEXICAL_SEARCH_INDEX,
            "compound": {
                "must": [{"text": {"query": ctx.query_text, "path": "text"}}],
                "filter": filters,
            },
        }
    }


def recency_match(ctx: RetrievalContext) -> dict[str, Any]:
    return {"$match": {"session_id": ctx.session_id, "evicted": False,
                       **owner_clause(ctx.owner_subject)}}


def sub_pipelines(ctx: RetrievalContext, limit: int) -> dict[str, list[dict[str, Any]]]:
    """The ranked selection pipelines, by signal name, in fusion order. They contain only
    selection stages, so they are valid inside ``$rankFusion`` as they are."""
    pipelines: dict[str, list[dict[str, Any]]] = {}
    if ctx.query_embedding is not None and len(ctx.query_embedding) > 0:
        pipelines["semantic"] = [vector_stage(ctx, limit)]
    if wants_lexical(ctx):
        pipelines["lexical"] = [search_stage(ctx), {"$limit": limit}]
    pipelines["recency"] = [recency_match(ctx), {"$sort": {"updated_at": -1, "_id": 1}},
                            {"$limit": limit}]
    return pipelines


def exact_semantic_pipeline(ctx: RetrievalContext) -> list[dict[str, Any]]:
    """The rows an exact semantic ranking compares: every live, in-scope mirror row of
    the session (the ``$vectorSearch`` filter, as a plain ``$match``), ids and vectors."""
    return [recency_match(ctx), {"$project": {"_id": 1, "embedding": 1}}]


def exact_semantic_ranking(docs: Sequence[Mapping[str, Any]], query: Sequence[float],
                           limit: int) -> list[str]:
    """Document ids by exact cosine similarity to ``query``, best first, ties by id;
    rows without an embedding of the query's length do not rank."""
    import numpy as np

    q = np.asarray([float(x) for x in query], dtype=np.float64)
    rows = [(str(d["_id"]), d.get("embedding")) for d in docs]
    rows = [(i, e) for i, e in rows if e is not None and len(e) == len(q)]
    if not rows or limit <= 0:
        return []
    matrix = np.asarray([e for _, e in rows], dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
    norms[norms == 0.0] = 1.0
    scores = (matrix @ q) / norms
    order = sorted(range(len(rows)), key=lambda k: (-scores[k], rows[k][0]))
    return [rows[k][0] for k in order[:limit]]


def rank_fusion_pipeline(pipelines: Mapping[str, list[dict[str, Any]]], limit: int) -> list[dict[str, Any]]:
    return [
        {
            "$rankFusion": {
                "input": {"pipelines": {name: list(p) for name, p in pipelines.items()}},
                "combination": {"weights": {name: DEFAULT_WEIGHTS[name] for name in pipelines}},
            }
        },
        {"$limit": limit},
        {"$project": {"_id": 1, "score": {"$meta": "score"}}},
    ]


#: A tiny ranked pipeline: if the server can fuse this, it has ``$rankFusion``.
PROBE_PIPELINE: list[dict[str, Any]] = [
    {"$rankFusion": {"input": {"pipelines": {"probe": [{"$sort": {"_id": 1}}, {"$limit": 1}]}}}},
    {"$limit": 1},
    {"$project": {"_id": 1}},
]


def fuse_client_side(rankings: Mapping[str, Sequence[str]], limit: int) -> list[tuple[str, float, dict[str, int | None]]]:
    """Weighted RRF of the recorded sub-pipeline results (lists of document ids)."""
    names = list(rankings)
    fused = rrf_fuse([list(rankings[n]) for n in names], [DEFAULT_WEIGHTS[n] for n in names],
                     k=DEFAULT_RRF_K, limit=limit)
    return [(str(f.key), f.score, dict(zip(names, f.ranks))) for f in fused]


NO_SERVER_RETRIEVAL = (
    "server-side retrieval needs Atlas Search ($vectorSearch, $search), which this deployment "
    "does not have; use MongoDB Atlas or the mongodb/mongodb-atlas-local image, or turn "
    "SEMVEC_MONGO_ITEM_SYNC off to retrieve in-process"
)


class _refuse_without_atlas_search:
    """Inside the generic error mapping: "no Atlas Search here" becomes a refusal with
    advice, not an obscure backend error."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, Exception) and is_no_atlas_search(exc):
            raise UnsupportedOperation(NO_SERVER_RETRIEVAL) from exc
        return False


class MongoRetrievalBackend:
    """RetrievalBackend ranking server-side on MongoDB Atlas."""

    name = "mongo-server"
    signals: tuple[str, ...] = ("semantic", "lexical", "recency")
    #: RetrievalContext fields this backend accepts and ignores (``retrieve diff``
    #: reports them from here): fusion knobs (fixed weights replace them), the live
    #: ``memory`` (we read the mirror instead) and the ``stage`` trace hook.
    inert_fields: frozenset[str] = frozenset({"rrf_k", "rrf_weights", "fuse_with_bm25", "memory", "stage"})
    DEFAULT_WEIGHTS = DEFAULT_WEIGHTS

    def __init__(self, mirror: Any, *, force_client_rrf: bool = False) -> None:
        self._mirror = mirror
        self._collection = mirror.collection
        self._force_client_rrf = bool(force_client_rrf)
        self._rank_fusion: bool | None = None
        self._lock = threading.Lock()
        self.last_fusion: str | None = None  # "server" | "client": what the last search used

    # -- $rankFusion support ----------------------------------------------------------

    def detect_rank_fusion(self) -> bool:
        """Probe once and cache. Never gated on a version number."""
        if self._force_client_rrf:
            return False
        with self._lock:
            if self._rank_fusion is None:
                self._rank_fusion = self._probe()
            return self._rank_fusion

    def _probe(self) -> bool:
        from pymongo.errors import OperationFailure

        try:
            list(self._collection.aggregate(PROBE_PIPELINE))
        except (OperationFailure, NotImplementedError):
            return False
        except Exception:  # noqa: BLE001 - unreachable etc. are real errors
            with driver_errors("retrieval.probe"):
                raise
        return True

    # -- search ---------------------------------------------------------------------

    def search(self, ctx: RetrievalContext) -> list[MemoryUnit]:
        limit = widened_limit(ctx)
        pipelines = sub_pipelines(ctx, limit)
        ranked = None
        if self.detect_rank_fusion():
            ranked = self._fuse_on_server(pipelines, limit)
        if ranked is None:
            ranked = self._fuse_on_client(pipelines, limit)
        return self._consistent(ctx, ranked, self.last_fusion)

    def exact_search(self, ctx: RetrievalContext) -> list[MemoryUnit]:
        """The same search with the semantic signal exact: ``$vectorSearch`` (approximate
        nearest neighbours) replaced by every live, in-scope mirror row of the session
        ranked in-process by cosine; the other signals, the client-side fusion, the
        consistent read and the narrowing are the server side's own. What ``retrieve
        diff --exact`` measures recall against."""
        limit = widened_limit(ctx)
        pipelines = sub_pipelines(ctx, limit)
        rankings: dict[str, list[str]] = {}
        for name, pipeline in pipelines.items():
            with driver_errors(f"retrieval.exact.{name}"), _refuse_without_atlas_search():
                if name == "semantic":
                    docs = self._collection.aggregate(exact_semantic_pipeline(ctx))
                    rankings[name] = exact_semantic_ranking(list(docs), ctx.query_embedding or (), limit)
                else:
                    docs = self._collection.aggregate([*pipeline, {"$project": {"_id": 1}}])
                    rankings[name] = [str(d["_id"]) for d in docs]
        return self._consistent(ctx, fuse_client_side(rankings, limit), "exact")

    def _consistent(self, ctx: RetrievalContext, ranked, fusion: str | None) -> list[MemoryUnit]:
        """The consistent read (stale, evicted or foreign rows drop out), then narrowing."""
        live = self._mirror.fetch_live(ctx.session_id, [doc_id for doc_id, _, _ in ranked],
                                       owner_subject=ctx.owner_subject)
        candidates = []
        for doc_id, score, ranks in ranked:
            item = live.get(doc_id)
            if item is None:
                continue  # stale, evicted or foreign: the consistent read said no
            candidates.append(MemoryUnit(
                item_id=item.item_id, text=item.text, score=float(score), tier=item.tier,
                embedding=item.embedding, updated_at=item.updated_at,
                owner_subject=item.owner_subject, session_id=item.session_id,
                meta={"fusion": fusion, "ranks": ranks},
            ))
        return apply_narrowing(ctx, candidates)

    def _fuse_on_server(self, pipelines: Mapping[str, list[dict[str, Any]]],
                        limit: int) -> list[tuple[str, float, dict[str, int | None]]] | None:
        from pymongo.errors import OperationFailure

        try:
            docs = list(self._collection.aggregate(rank_fusion_pipeline(pipelines, limit)))
        except OperationFailure:
            # The probe passed but the real query did not (an index, a stage inside the
            # fusion): fall back to client-side fusion for good, not per query.
            with self._lock:
                self._rank_fusion = False
            log.warning("mongo op=retrieval.rank_fusion outcome=fallback category=OperationFailure")
            return None
        except Exception:  # noqa: BLE001
            with driver_errors("retrieval.rank_fusion"):
                raise
        self.last_fusion = "server"
        return [(str(d["_id"]), float(d.get("score") or 0.0), {}) for d in docs]

    def _fuse_on_client(self, pipelines: Mapping[str, list[dict[str, Any]]],
                        limit: int) -> list[tuple[str, float, dict[str, int | None]]]:
        rankings: dict[str, list[str]] = {}
        for name, pipeline in pipelines.items():
            with driver_errors(f"retrieval.{name}"), _refuse_without_atlas_search():
                docs = self._collection.aggregate([*pipeline, {"$project": {"_id": 1}}])
                rankings[name] = [str(d["_id"]) for d in docs]
        self.last_fusion = "client"
        return fuse_client_side(rankings, limit)
