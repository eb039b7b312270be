"""Server-side retrieval over the item mirror (``semvec_memory_items``), step for step as
the engine's own ``MongoRetrievalBackend`` ranks (ENGINE-WIRE section 8b), so that
``retrieve diff`` shows what turning ``SEMVEC_MONGO_ITEM_SYNC`` on would change.

- No query vector, or ``top_k <= 0``: ``[]`` before any query.
- Widths: ``fetch_k = max(fetch_width(ctx), top_k)``; every sub-pipeline returns
  ``sub_limit = max(fetch_k, 3 * top_k, 20)`` rows; ``numCandidates = max(10 * sub_limit, 100)``.
- Signals, in this order: semantic (``$vectorSearch``), recency (``$sort`` on
  ``updated_at``), lexical (``$search``, when BM25 is on and the stripped text is not empty).
  Session, ``evicted: false`` and the owner (when one is bound) filter semantic and
  lexical before top-k. Recency, as the engine sends it, has NO owner filter (an engine
  defect, ENGINE-WIRE section 7): other owners' rows take recency ranks and drop out only
  at the final read. :class:`MongoRetrievalBackend` reproduces it (``recency_owner_filter=
  False``, "as the engine ranks"); the corrected mode filters recency by owner too.
- Fusion, weights semantic 0.5 / recency 0.2 / lexical 0.3: ``$rankFusion`` when the
  engine would use it, else client-side RRF (``SEMVEC_RRF_K``, default 60, 1-based ranks,
  ties by first appearance in signal order, zero weights skipped, no cut). A failing
  sub-pipeline is left out and the others fused; any failure of a query-time
  ``$rankFusion`` switches the retriever to client-side fusion for good.
- Final read: one ``find`` of ALL fused ids (session, live, owner when bound); rows with
  an empty ``unit`` are dropped as the engine drops them; the first ``fetch_k`` in fused
  order go to the shared narrowing stage (``backends.retrieval.rules``).

``$rankFusion`` detection: our probe is read-only. The engine's probe inserts into and
drops ``_semvec_rankfusion_probe``, so credentials without insert and drop rights make
the engine fuse client-side for good; :func:`engine_probe_rights` asks the server for
those rights and :meth:`MongoRetrievalBackend.fusion_paths` reports both paths.

Ours beyond the engine: an unowned-only filter (``owner_subject=None``: stored null or
``""``), which the engine cannot express; a deployment without Atlas Search is refused
with advice (the engine fails there too, creating its search indexes before the query);
and when EVERY sub-pipeline fails we raise the first failure (the engine logs and
returns ``[]``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping, Sequence

from backends.contract import UNSCOPED, MemoryUnit, RetrievalContext, validate_owner_filter
from backends.errors import UnsupportedOperation
from backends.mongo.errors import driver_errors, is_no_atlas_search
from backends.mongo.schema import LEXICAL_SEARCH_INDEX, VECTOR_SEARCH_INDEX
from backends.mongo.state import owner_clause
from backends.retrieval import apply_narrowing, fetch_width, rrf_fuse
from backends.retrieval.fusion import SERVER_SIGNAL_WEIGHTS, effective_rrf_k

log = logging.getLogger("backends.mongo")

#: The shared server-side split (``backends.retrieval.fusion``).
DEFAULT_WEIGHTS: Mapping[str, float] = SERVER_SIGNAL_WEIGHTS
#: The signals, in the order the engine builds (and fuses) them.
SIGNAL_ORDER = ("semantic", "recency", "lexical")
#: The collection the engine's ``$rankFusion`` probe writes and drops.
ENGINE_PROBE_COLLECTION = "_semvec_rankfusion_probe"


def fetch_k_of(ctx: RetrievalContext) -> int:
    """The candidate width handed to narrowing: ``max(fetch_width(ctx), top_k)``."""
    return max(fetch_width(ctx), ctx.top_k)


def sub_limit(ctx: RetrievalContext) -> int:
    """Rows per sub-pipeline: ``max(fetch_k, 3 * top_k, 20)``."""
    return max(fetch_k_of(ctx), 3 * ctx.top_k, 20)


def num_candidates(limit: int) -> int:
    return max(10 * limit, 100)


def lexical_text(ctx: RetrievalContext) -> str:
    """The ``$search`` query: the stripped text, and "" (no lexical signal) when BM25 is
    off or nothing is left."""
    return (ctx.query_text or "").strip() if ctx.use_bm25 else ""


def _unowned_only(ctx: RetrievalContext) -> bool:
    return ctx.owner_subject is None


def _owner_match(ctx: RetrievalContext) -> dict[str, Any]:
    """The owner as the engine adds it to a filter document (``owner_subject: value``),
    or ours for unowned-only (null or ``""``); nothing when unscoped."""
    validate_owner_filter(ctx.owner_subject)
    if ctx.owner_subject is UNSCOPED:
        return {}
    return owner_clause(ctx.owner_subject)


def vector_stage(ctx: RetrievalContext, limit: int) -> dict[str, Any]:
    flt: dict[str, Any] = {"session_id": ctx.session_id, "evicted": False}
    if _unowned_only(ctx):
        flt["$or"] = [{"owner_subject": {"$eq": None}}, {"owner_subject": {"$eq": ""}}]
    else:
        flt.update(_owner_match(ctx))
    return {
        "$vectorSearch": {
            "index": VECTOR_SEARCH_INDEX,
            "path": "embedding",
            "queryVector": [float(x) for x in ctx.query_embedding or ()],
            "numCandidates": num_candidates(limit),
            "limit": limit,
            "filter": flt,
        }
    }


def lexical_stages(ctx: RetrievalContext, limit: int) -> list[dict[str, Any]]:
    filters: list[dict[str, Any]] = [
        {"equals": {"path": "session_id", "value": ctx.session_id}},
        {"equals": {"path": "evicted", "value": False}},
    ]
    if _unowned_only(ctx):
        filters.append({"compound": {"should": [
            {"equals": {"path": "owner_subject", "value": None}},
            {"equals": {"path": "owner_subject", "value": ""}}], "minimumShouldMatch": 1}})
    elif ctx.owner_subject is not UNSCOPED:
        filters.append({"equals": {"path": "owner_subject", "value": ctx.owner_subject}})
    return [
        {"$search": {
            "index": LEXICAL_SEARCH_INDEX,
            "compound": {
                "must": [{"text": {"query": lexical_text(ctx), "path": "text"}}],
                "filter": filters,
            },
        }},
        {"$limit": limit},
    ]


def recency_stages(ctx: RetrievalContext, limit: int, *,
                   owner_filter: bool = False) -> list[dict[str, Any]]:
    """Recency as the engine sends it (no owner filter), or corrected (``owner_filter``)."""
    match: dict[str, Any] = {"session_id": ctx.session_id, "evicted": False}
    if owner_filter:
        match.update(_owner_match(ctx))
    return [{"$match": match}, {"$sort": {"updated_at": -1, "_id": 1}}, {"$limit": limit}]


def sub_pipelines(ctx: RetrievalContext, limit: int | None = None, *,
                  recency_owner_filter: bool = False) -> dict[str, list[dict[str, Any]]]:
    """The ranked selection pipelines by signal, in the engine's order (semantic,
    recency, lexical); valid inside ``$rankFusion`` as they are."""
    limit = sub_limit(ctx) if limit is None else limit
    pipelines: dict[str, list[dict[str, Any]]] = {
        "semantic": [vector_stage(ctx, limit)],
        "recency": recency_stages(ctx, limit, owner_filter=recency_owner_filter),
    }
    if lexical_text(ctx):
        pipelines["lexical"] = lexical_stages(ctx, limit)
    return pipelines


#: What each sub-pipeline returns (the engine projects the same).
PROJECT_ID_UNIT: dict[str, Any] = {"$project": {"_id": 1, "unit": 1}}


def client_pipeline(stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One sub-pipeline as the client-side path sends it."""
    return [*stages, PROJECT_ID_UNIT]


def exact_semantic_pipeline(ctx: RetrievalContext) -> list[dict[str, Any]]:
    """The rows an exact semantic ranking compares: every live, in-scope mirror row of
    the session (the ``$vectorSearch`` filter, as a plain ``$match``), ids and vectors."""
    return [{"$match": {"session_id": ctx.session_id, "evicted": False, **_owner_match(ctx)}},
            {"$project": {"_id": 1, "embedding": 1}}]


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


def rank_fusion_pipeline(pipelines: Mapping[str, list[dict[str, Any]]],
                         limit: int) -> list[dict[str, Any]]:
    """The engine's ``$rankFusion`` query: no scoreDetails, ``$limit`` the sub limit."""
    return [
        {"$rankFusion": {
            "input": {"pipelines": {name: list(p) for name, p in pipelines.items()}},
            "combination": {"weights": {name: DEFAULT_WEIGHTS[name] for name in pipelines}},
        }},
        {"$limit": limit},
        PROJECT_ID_UNIT,
    ]


#: A tiny ranked pipeline: if the server can fuse this, it has ``$rankFusion``.
PROBE_PIPELINE: list[dict[str, Any]] = [
    {"$rankFusion": {"input": {"pipelines": {"probe": [{"$sort": {"_id": 1}}, {"$limit": 1}]}}}},
    {"$limit": 1},
    {"$project": {"_id": 1}},
]


def fuse_client_side(rankings: Mapping[str, Sequence[str]],
                     limit: int | None = None) -> list[tuple[str, float, dict[str, int | None]]]:
    """The engine's client-side RRF of recorded sub-pipeline results (document ids, lists
    in signal order): ``SEMVEC_RRF_K`` (default 60), ties by first appearance, a
    zero-weight list skipped, no cut unless ``limit``."""
    names = list(rankings)
    fused = rrf_fuse([list(rankings[n]) for n in names], [DEFAULT_WEIGHTS[n] for n in names],
                     k=effective_rrf_k(None), ties="first", limit=limit)
    return [(str(f.key), f.score, dict(zip(names, f.ranks))) for f in fused]


def final_read(live: Mapping[str, Any], ranked: Sequence[tuple[str, float, Any]],
               fetch_k: int) -> list[tuple[str, float, Any, Any]]:
    """The engine's final read over ``live`` (doc id -> MemoryItem, what the ``find`` of
    all fused ids returned): fused order, rows not live dropped, rows with an empty
    ``unit`` dropped, the first ``fetch_k`` kept. ``(doc_id, score, ranks, item)``."""
    out: list[tuple[str, float, Any, Any]] = []
    for doc_id, score, ranks in ranked:
        if len(out) >= fetch_k:
            break
        item = live.get(doc_id)
        if item is None or not item.unit:
            continue
        out.append((doc_id, score, ranks, item))
    return out


def engine_probe_rights(database: Any) -> tuple[bool | None, str]:
    """Whether the connected user may do what the engine's ``$rankFusion`` probe does
    (insert into and drop ``_semvec_rankfusion_probe``), read with ``connectionStatus``
    (read-only): ``(True|False, why)``, or ``(None, why)`` when the server does not say."""
    try:
        status = database.command({"connectionStatus": 1, "showPrivileges": True})
    except Exception as exc:  # noqa: BLE001 - a server that does not say
        return None, f"connectionStatus failed ({type(exc).__name__})"
    info = status.get("authInfo", {}) if isinstance(status, Mapping) else {}
    if not info.get("authenticatedUsers"):
        return True, "no authentication: every action is allowed"
    wanted = {"insert", "dropCollection"}
    granted: set[str] = set()
    for privilege in info.get("authenticatedUserPrivileges", []) or []:
        resource = privilege.get("resource", {}) or {}
        if resource.get("anyResource") or resource.get("cluster"):
            if resource.get("anyResource"):
                granted |= set(privilege.get("actions", []))
            continue
        db_ok = resource.get("db") in ("", database.name)
        coll_ok = resource.get("collection") in ("", ENGINE_PROBE_COLLECTION)
        if db_ok and coll_ok:
            granted |= set(privilege.get("actions", []))
    missing = sorted(wanted - granted)
    if missing:
        return False, f"the user lacks {', '.join(missing)} on {database.name}.{ENGINE_PROBE_COLLECTION}"
    return True, "the user may insert into and drop the probe collection"


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
    """RetrievalBackend ranking server-side on MongoDB Atlas, as the engine ranks
    (``recency_owner_filter=False``, the default) or corrected (recency filtered by owner).

    Reached through the adapter's ``server_retriever()`` (ours), never handed to the
    engine: its ``search(ctx)`` takes our context, which names the session and owner."""

    signals: tuple[str, ...] = ("semantic", "lexical", "recency")
    #: RetrievalContext fields this backend accepts and ignores (``retrieve diff``
    #: reports them from here): fusion knobs (fixed weights replace them), the live
    #: ``memory`` (we read the mirror instead) and the ``stage`` trace hook.
    inert_fields: frozenset[str] = frozenset({"rrf_k", "rrf_weights", "fuse_with_bm25", "memory", "stage"})
    DEFAULT_WEIGHTS = DEFAULT_WEIGHTS
    ENGINE_NAME = "mongo-server (as the engine ranks)"
    CORRECTED_NAME = "mongo-server (corrected: recency filtered by owner)"

    def __init__(self, mirror: Any, *, force_client_rrf: bool = False,
                 recency_owner_filter: bool = False) -> None:
        self._mirror = mirror
        self._collection = mirror.collection
        self._force_client_rrf = bool(force_client_rrf)
        self.recency_owner_filter = bool(recency_owner_filter)
        self.name = self.CORRECTED_NAME if self.recency_owner_filter else self.ENGINE_NAME
        self._rank_fusion: bool | None = None
        self._lock = threading.Lock()
        self.last_fusion: str | None = None  # "server" | "client": what the last search used
        self.fusion_reason: str | None = None

    def corrected(self) -> "MongoRetrievalBackend":
        """The same retriever with recency filtered by owner (not what the engine does)."""
        twin = MongoRetrievalBackend(self._mirror, force_client_rrf=self._force_client_rrf,
                                     recency_owner_filter=True)
        twin._rank_fusion = self._rank_fusion
        return twin

    # -- $rankFusion support ----------------------------------------------------------

    def detect_rank_fusion(self) -> bool:
        """Whether this retriever fuses with ``$rankFusion``: as the engine would for these
        credentials (its probe also needs insert and drop rights), probed read-only, once."""
        if self._force_client_rrf:
            return False
        with self._lock:
            if self._rank_fusion is None:
                supported = self._probe()
                rights, why = engine_probe_rights(self._collection.database) if supported \
                    else (None, "")
                self._rank_fusion = supported and rights is not False
                self.fusion_reason = (
                    "the server has no $rankFusion" if not supported else
                    f"the engine's probe would fail: {why}" if rights is False else
                    f"$rankFusion available ({why})")
            return self._rank_fusion

    def fusion_paths(self) -> dict[str, Any]:
        """Which fusion path the server offers (our read-only probe), and which the
        engine would take with these credentials, with the reason."""
        supported = False if self._force_client_rrf else self._probe()
        rights, why = engine_probe_rights(self._collection.database)
        engine = "server" if supported and rights is not False else "client"
        return {"server_has_rank_fusion": supported, "engine_probe_rights": rights,
                "engine_path": engine,
                "reason": why if supported else "the server has no $rankFusion"}

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

    def pipelines(self, ctx: RetrievalContext) -> dict[str, list[dict[str, Any]]]:
        """The sub-pipelines this retriever sends for ``ctx`` (without projection)."""
        return sub_pipelines(ctx, recency_owner_filter=self.recency_owner_filter)

    def search(self, ctx: RetrievalContext) -> list[MemoryUnit]:
        if ctx.top_k <= 0 or ctx.query_embedding is None or len(ctx.query_embedding) == 0:
            return []
        pipelines = self.pipelines(ctx)
        ranked = None
        if self.detect_rank_fusion():
            ranked = self._fuse_on_server(pipelines, sub_limit(ctx))
        if ranked is None:
            ranked = self._fuse_on_client(pipelines)
        return self._finish(ctx, ranked, self.last_fusion)

    def result_notes(self, ctx: RetrievalContext, units: Sequence[MemoryUnit]) -> list[tuple[str, str]]:
        """For ``retrieve diff``: whether the engine's recency defect changed this result
        (a corrected search is run to tell), and when the engine's fusion path differs
        from what the server offers (credentials without insert/drop rights)."""
        notes: list[tuple[str, str]] = []
        if self.fusion_reason and "engine's probe would fail" in self.fusion_reason:
            notes.append(("engine-fusion-path", (
                "the server has $rankFusion, but the engine would fuse client-side with these "
                f"credentials ({self.fusion_reason}); so does this ranking")))
        if self.recency_owner_filter or ctx.owner_subject is UNSCOPED:
            return notes
        corrected = [u.item_id for u in self.corrected().search(ctx)]
        engine = [u.item_id for u in units]
        if corrected == engine:
            return notes
        return notes + [("engine-recency-defect", (
            "the engine's recency signal is not filtered by owner (an engine defect, "
            "ENGINE-WIRE section 7): other owners' rows in this session took recency ranks, "
            "so the engine returns " + (", ".join(engine) or "nothing") + "; filtered by "
            "owner before top-k it would be " + (", ".join(corrected) or "nothing")))]

    def exact_search(self, ctx: RetrievalContext) -> list[MemoryUnit]:
        """The same search with the semantic signal exact: ``$vectorSearch`` (approximate
        nearest neighbours) replaced by every live, in-scope mirror row of the session
        ranked in-process by cosine; the other signals, the client-side fusion, the
        final read and the narrowing are the server side's own. What ``retrieve diff
        --exact`` measures recall against."""
        if ctx.top_k <= 0 or ctx.query_embedding is None or len(ctx.query_embedding) == 0:
            return []
        limit = sub_limit(ctx)
        rankings: dict[str, list[str]] = {}
        for name, pipeline in self.pipelines(ctx).items():
            with driver_errors(f"retrieval.exact.{name}"), _refuse_without_atlas_search():
                if name == "semantic":
                    docs = self._collection.aggregate(exact_semantic_pipeline(ctx))
                    rankings[name] = exact_semantic_ranking(list(docs), ctx.query_embedding or (), limit)
                else:
                    docs = self._collection.aggregate(client_pipeline(pipeline))
                    rankings[name] = [str(d["_id"]) for d in docs]
        return self._finish(ctx, fuse_client_side(rankings), "exact")

    def _finish(self, ctx: RetrievalContext, ranked, fusion: str | None) -> list[MemoryUnit]:
        """The final read of all fused ids, then the shared narrowing."""
        live = self._mirror.fetch_live(ctx.session_id, [doc_id for doc_id, _, _ in ranked],
                                       owner_subject=ctx.owner_subject)
        candidates = [
            MemoryUnit(
                item_id=item.item_id, text=item.text, score=float(score), tier=item.tier,
                embedding=item.embedding, updated_at=item.updated_at,
                owner_subject=item.owner_subject, session_id=item.session_id,
                meta={"fusion": fusion, "ranks": ranks, "score_kind": "fused"},
            )
            for _doc_id, score, ranks, item in final_read(live, ranked, fetch_k_of(ctx))
        ]
        return apply_narrowing(ctx, candidates)

    def _fuse_on_server(self, pipelines: Mapping[str, list[dict[str, Any]]],
                        limit: int) -> list[tuple[str, float, dict[str, int | None]]] | None:
        try:
            docs = list(self._collection.aggregate(rank_fusion_pipeline(pipelines, limit)))
        except Exception as exc:  # noqa: BLE001 - as the engine: any failure, client side for good
            with self._lock:
                self._rank_fusion = False
            log.warning("mongo op=retrieval.rank_fusion outcome=fallback category=%s",
                        type(exc).__name__)
            return None
        self.last_fusion = "server"
        return [(str(d["_id"]), float(d.get("score") or 0.0), {}) for d in docs]

    def _fuse_on_client(self, pipelines: Mapping[str, list[dict[str, Any]]]
                        ) -> list[tuple[str, float, dict[str, int | None]]]:
        rankings: dict[str, list[str]] = {}
        failures: list[BaseException] = []
        for name, pipeline in pipelines.items():
            try:
                with driver_errors(f"retrieval.{name}"), _refuse_without_atlas_search():
                    docs = self._collection.aggregate(client_pipeline(pipeline))
                    rankings[name] = [str(d["_id"]) for d in docs]
            except UnsupportedOperation:
                raise  # no Atlas Search at all: the engine fails here too (index creation)
            except Exception as exc:  # noqa: BLE001 - as the engine: left out of the fusion
                log.warning("mongo op=retrieval.%s outcome=left-out category=%s",
                            name, type(exc).__name__)
                failures.append(exc)
        if not rankings and failures:
            raise failures[0]  # ours: nothing ran at all, say why rather than answer []
        self.last_fusion = "client"
        return fuse_client_side(rankings)
