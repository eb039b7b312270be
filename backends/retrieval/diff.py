"""``retrieve diff``: run one query (or many) in-process and server-side, line the two
rankings up, measure their agreement and explain where they must differ.

The explanations are never hard-coded per backend. They come from what the server-side
retriever declares about itself:

- ``inert_fields: frozenset[str]`` — RetrievalContext fields it ignores (contract);
- ``signals: tuple[str, ...]`` (optional) — the signals it ranks on; ``"recency"`` in it
  means it ranks partly on how recently an item was touched, which in-process cannot;
- ``"memory"`` in ``inert_fields`` means it reads a mirror rather than the live items, so
  it cannot see the current turn's mutations;
- ``result_notes(ctx, units)`` (optional) — ``(code, message)`` pairs about one result
  of its own (for example "the engine's recency defect changed this result");
- ``exact_search(ctx)`` (optional) — the same search with its approximate signal made
  exact; with ``exact=True`` each query also reports recall@k and Jaccard@k of the server
  side against it (how close the approximate index is to exact search, as vector stores
  measure retrieval quality), gated by ``min_recall``.
"""

from __future__ import annotations

import itertools
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from backends.contract import MemoryItem, MemoryUnit, RetrievalContext
from backends.retrieval.fusion import effective_rrf_k, effective_rrf_weights
from backends.retrieval.items import find_item, parse_vector, read_jsonl
from backends.retrieval.metrics import (
    ExactAgreement,
    RankingAgreement,
    RankMove,
    compare_rankings,
    compare_to_exact,
    rank_moves,
)
from backends.retrieval.rules import wants_lexical

__all__ = [
    "SIDE_IN_PROCESS",
    "SIDE_SERVER",
    "SIDE_EXACT",
    "has_exact_search",
    "QuerySpec",
    "excerpt",
    "score_kind",
    "Note",
    "ordering_notes",
    "DiffRow",
    "QueryDiff",
    "DiffReport",
    "GateMiss",
    "load_queries_jsonl",
    "resolve_query",
    "run_side",
    "diff_query",
    "diff_queries",
    "divergence_notes",
    "aggregate",
    "evaluate_gates",
]

SIDE_IN_PROCESS = "in-process"
SIDE_SERVER = "server"
#: the server side's own search with its approximate signal made exact
SIDE_EXACT = "exact"
PRESENT_BOTH = "both"
PRESENT_IN_PROCESS = "in-process only"
PRESENT_SERVER = "server only"
EXCERPT_CHARS = 60

#: Per-query keys a queries file may set besides the query itself.
QUERY_OVERRIDES = {"top_k": int, "use_bm25": bool, "bm25_fetch_k": int,
                   "mmr_fetch_k": int, "mmr_lambda": float}
_QUERY_KEYS = {"id", "query", "text", "vector", "embedding", "like"} | set(QUERY_OVERRIDES)


@dataclass(frozen=True)
class QuerySpec:
    """One query of a run: text and/or vector, or ``like`` an existing item."""

    query_id: str
    text: str | None = None
    vector: tuple[float, ...] | None = None
    like: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Note:
    """One reason the two sides may disagree. ``code`` is stable for machines."""

    code: str
    message: str


@dataclass(frozen=True)
class DiffRow:
    """Rank ``rank`` on each side: item, excerpt, score and where else it appears."""

    rank: int
    in_process_item: str | None
    in_process_text: str | None
    in_process_score: float | None
    in_process_presence: str | None
    server_item: str | None
    server_text: str | None
    server_score: float | None
    server_presence: str | None
    #: what each score is: "tier-weighted cosine", "bm25", "fused" (RRF), "reranker"
    in_process_score_kind: str | None = None
    server_score_kind: str | None = None


@dataclass
class QueryDiff:
    query_id: str
    in_process: list[MemoryUnit]
    server: list[MemoryUnit]
    rows: list[DiffRow]
    metrics: RankingAgreement
    moves: list[RankMove]
    notes: list[Note]
    settings: dict[str, Any]
    #: with ``exact=True``: the exact side's ranking and the server side against it
    exact_ranking: list[MemoryUnit] | None = None
    exact: ExactAgreement | None = None
    #: what was asked: the query text, or the item it is ``like`` (a reader of a report
    #: sees which query disagreed, not only its id)
    text: str | None = None
    like: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "query": self.query_id,
            **({"text": self.text} if self.text is not None else {}),
            **({"like": self.like} if self.like is not None else {}),
            "settings": self.settings,
            "metrics": self.metrics.to_dict(),
            "rows": [asdict(r) for r in self.rows],
            "moves": [
                {"item": m.item, "in_process_rank": m.rank_a, "server_rank": m.rank_b,
                 "delta": m.delta, "side": _presence(m.side)}
                for m in self.moves
            ],
            "notes": [asdict(n) for n in self.notes],
        }
        if self.exact is not None:
            exact: dict[str, Any] = dict(self.exact.to_dict())
            exact["ranking"] = [u.item_id for u in self.exact_ranking or ()]
            data["exact"] = exact
        return data


@dataclass(frozen=True)
class GateMiss:
    query_id: str
    metric: str
    value: float
    threshold: float


@dataclass
class DiffReport:
    queries: list[QueryDiff]
    aggregate: dict[str, Any]
    server: str
    misses: list[GateMiss] = field(default_factory=list)
    #: the thresholds the run was gated on (``min_rbo``...); empty: no gate, no verdict
    thresholds: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.misses

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "aggregate": self.aggregate,
            "queries": [q.to_dict() for q in self.queries],
            "gate": {"passed": self.passed, "missed": [asdict(m) for m in self.misses],
                     "thresholds": dict(self.thresholds)},
        }


def _presence(side: str) -> str:
    return {"both": PRESENT_BOTH, "a_only": PRESENT_IN_PROCESS, "b_only": PRESENT_SERVER}[side]


def score_kind(unit: MemoryUnit) -> str | None:
    """What a unit's score is, as its retriever labelled it (``meta["score_kind"]``)."""
    kind = (unit.meta or {}).get("score_kind")
    return str(kind) if kind is not None else None


def excerpt(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"


# -- queries ---------------------------------------------------------------------------


def _query_spec(record: Mapping[str, Any], default_id: str) -> QuerySpec:
    unknown = set(record) - _QUERY_KEYS
    if unknown:
        raise ValueError(f"unknown key(s) {sorted(unknown)}; allowed: {sorted(_QUERY_KEYS)}")
    text = record.get("query", record.get("text"))
    if text is not None and not isinstance(text, str):
        raise ValueError("query text must be a string")
    raw_vector = record.get("vector", record.get("embedding"))
    vector = parse_vector(raw_vector, "vector") if raw_vector is not None else None
    like = record.get("like")
    if like is not None and (not isinstance(like, str) or not like):
        raise ValueError("like must be an item id")
    if like is not None and vector is not None:
        raise ValueError("give either vector or like, not both")
    if text is None and vector is None and like is None:
        raise ValueError("a query needs text, a vector or like")
    overrides = {}
    for key, kind in QUERY_OVERRIDES.items():
        if key in record:
            value = record[key]
            if kind is bool and not isinstance(value, bool):
                raise ValueError(f"{key} must be true or false")
            if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{key} must be an integer")
            overrides[key] = kind(value)
    return QuerySpec(str(record.get("id") or default_id), text, vector, like, overrides)


def load_queries_jsonl(path: str | Path) -> list[QuerySpec]:
    """Queries, one JSON object a line: ``id``, ``query`` (text), ``vector`` or ``like``,
    and optional ``top_k``, ``use_bm25``, ``bm25_fetch_k``, ``mmr_fetch_k``,
    ``mmr_lambda``. Errors name the line."""
    numbers = itertools.count(1)  # default ids q1, q2, ... in file order
    specs = read_jsonl(path, lambda record: _query_spec(record, f"q{next(numbers)}"))
    if not specs:
        raise ValueError(f"{path}: no queries")
    return specs


def resolve_query(
    spec: QuerySpec, items: Sequence[MemoryItem]
) -> tuple[tuple[float, ...] | None, str | None]:
    """(vector, text) for a spec; ``like`` borrows the item's embedding and (unless the
    spec has its own text) its text, so no embedding model is needed."""
    if spec.like is None:
        return spec.vector, spec.text
    item = find_item(items, spec.like)
    if item is None:
        raise LookupError(f"item {spec.like!r} is not among the session's live items")
    if item.embedding is None:
        raise LookupError(f"item {spec.like!r} has no embedding to query with")
    return tuple(float(x) for x in item.embedding), spec.text if spec.text is not None else item.text


# -- running ---------------------------------------------------------------------------


def run_side(
    side: str, ctx: RetrievalContext, *, items: Sequence[MemoryItem] | None, server: Any
) -> list[MemoryUnit]:
    """Rank with one side. In-process reads ``items``; the server side gets the same
    context, minus the live items and trace hook when it declares those inert."""
    if side == SIDE_IN_PROCESS:
        from backends.retrieval.inprocess import InProcessRetrievalBackend

        return InProcessRetrievalBackend().search(replace(ctx, memory=tuple(items or ())))
    if side in (SIDE_SERVER, SIDE_EXACT):
        if server is None:
            raise LookupError("this backend has no server-side retrieval")
        if side == SIDE_EXACT and not has_exact_search(server):
            raise LookupError(f"{getattr(server, 'name', 'the server side')} has no exact search")
        inert = frozenset(getattr(server, "inert_fields", frozenset()))
        server_ctx = replace(
            ctx,
            memory=None if "memory" in inert else tuple(items or ()),
            stage=None if "stage" in inert else ctx.stage,
        )
        search = server.exact_search if side == SIDE_EXACT else server.search
        return list(search(server_ctx))
    raise ValueError(f"unknown side {side!r}; use {SIDE_IN_PROCESS!r}, {SIDE_SERVER!r} or {SIDE_EXACT!r}")


def has_exact_search(server: Any) -> bool:
    """Whether the server retriever can rank exactly (see the module docstring)."""
    return callable(getattr(server, "exact_search", None))


def _settings(ctx: RetrievalContext) -> dict[str, Any]:
    return {
        "session": ctx.session_id,
        "top_k": ctx.top_k,
        "use_bm25": ctx.use_bm25,
        "has_text": bool(ctx.query_text),
        "has_vector": ctx.query_embedding is not None,
        "bm25_fetch_k": ctx.bm25_fetch_k,
        "mmr_fetch_k": ctx.mmr_fetch_k,
        "rrf_k": effective_rrf_k(ctx.rrf_k),
        "rrf_weights": list(effective_rrf_weights(ctx.rrf_weights)),
    }


_CTX_DEFAULTS = {f.name: f.default for f in fields(RetrievalContext) if f.default is not MISSING}


def ordering_notes(ctx: RetrievalContext, items: Sequence[MemoryItem] | None) -> list[Note]:
    """What the in-process ranking of ``items`` cannot know of the engine's order: units of
    several tiers without a recorded in-tier position (how many), and BM25 ties at the cut
    that an engine on numpy 1.x orders differently
    (:meth:`~backends.retrieval.inprocess.InProcessRetrievalBackend.ordering_notes`).
    None for no items."""
    if not items:
        return []
    from backends.retrieval.inprocess import InProcessRetrievalBackend

    found = InProcessRetrievalBackend(cache_size=0).ordering_notes(
        replace(ctx, memory=tuple(items)))
    return [Note(code, message) for code, message in found]


def divergence_notes(
    ctx: RetrievalContext,
    server: Any,
    *,
    in_process: Sequence[MemoryUnit] = (),
    server_units: Sequence[MemoryUnit] = (),
    live_ids: set[str] | None = None,
    items_origin: str = "live",
    items: Sequence[MemoryItem] | None = None,
    agree: bool = False,
) -> list[Note]:
    """Why the two rankings may differ, from the server retriever's own declarations.

    When both sides returned the same ranking (``agree``) there is nothing to explain: only the notes
    about the inputs (items file, BM25 without text) remain, none about the server side.
    ``items`` (the in-process side's) tells whether their tier order was known."""
    notes: list[Note] = []
    if agree:
        if ctx.use_bm25 and not wants_lexical(ctx):
            notes.append(Note("bm25-without-text", "BM25 is on but the query has no text: the lexical signal is off on both sides"))
        if items_origin != "live":
            notes.append(Note("items-file", f"in-process ranked items from {items_origin}, not the store's live items"))
        return notes + ordering_notes(ctx, items)
    name = getattr(server, "name", type(server).__name__)
    inert = sorted(getattr(server, "inert_fields", frozenset()))
    signals = tuple(getattr(server, "signals", ()) or ())
    for field_name in inert:
        if field_name == "memory":
            notes.append(Note("mirror-lag", (
                f"{name} reads an item mirror, not the live memory (memory is inert): the "
                "mirror is written after each turn's state, so on a live turn it cannot see "
                "that turn's own memory changes, which in-process retrieval can"
                + (" (not measured here: this diff reads both sides from the store)"
                   if items_origin == "live" else ""))))
        elif field_name == "stage":
            notes.append(Note("inert-field", f"{name} emits no trace stages (stage is inert)"))
        else:
            value = getattr(ctx, field_name, None)
            set_by_caller = field_name in _CTX_DEFAULTS and value != _CTX_DEFAULTS[field_name]
            detail = f" (you set {field_name}={value!r}; in-process honoured it)" if set_by_caller else ""
            notes.append(Note("inert-field", f"{name} ignores {field_name}{detail}"))
    if "recency" in signals:
        notes.append(Note("recency-server-only", (
            f"{name} also ranks on recency (updated_at); in-process has no recency term, "
            "so server-side is a different ranking, not a subset")))
    if ctx.use_bm25 and not wants_lexical(ctx):
        notes.append(Note("bm25-without-text", "BM25 is on but the query has no text: the lexical signal is off on both sides"))
    if items_origin != "live":
        notes.append(Note("items-file", f"in-process ranked items from {items_origin}, not the store's live items"))
    notes.extend(ordering_notes(ctx, items))
    for note in getattr(server, "result_notes", lambda _ctx, _units: [])(ctx, server_units):
        notes.append(Note(*note))
    if live_ids is not None:
        stale = [u.item_id for u in server_units if u.item_id not in live_ids]
        if stale:
            shown = ", ".join(stale[:5]) + (" …" if len(stale) > 5 else "")
            notes.append(Note("not-live", (
                f"{len(stale)} server result(s) are not among the in-process live items "
                f"({shown}): mirror lag, an eviction since, or a different items source")))
    if not in_process and live_ids is not None and not live_ids:
        notes.append(Note("no-live-items", "in-process had no live items to rank"))
    return notes


def diff_query(
    ctx: RetrievalContext,
    *,
    items: Sequence[MemoryItem],
    server: Any,
    query_id: str = "query",
    p: float = 0.9,
    k: int | None = None,
    items_origin: str = "live",
    exact: bool = False,
) -> QueryDiff:
    """Both rankings of one query, lined up, measured and explained; with ``exact`` the
    server side is also measured against its exact search."""
    left = run_side(SIDE_IN_PROCESS, ctx, items=items, server=server)
    right = run_side(SIDE_SERVER, ctx, items=items, server=server)
    truth = run_side(SIDE_EXACT, ctx, items=items, server=server) if exact else None
    left_ids = [u.item_id for u in left]
    right_ids = [u.item_id for u in right]
    left_set, right_set = set(left_ids), set(right_ids)
    rows = []
    for rank in range(1, max(len(left), len(right)) + 1):
        a = left[rank - 1] if rank <= len(left) else None
        b = right[rank - 1] if rank <= len(right) else None
        rows.append(DiffRow(
            rank=rank,
            in_process_item=a.item_id if a else None,
            in_process_text=excerpt(a.text) if a else None,
            in_process_score=float(a.score) if a else None,
            in_process_presence=(PRESENT_BOTH if a.item_id in right_set else PRESENT_IN_PROCESS) if a else None,
            server_item=b.item_id if b else None,
            server_text=excerpt(b.text) if b else None,
            server_score=float(b.score) if b else None,
            server_presence=(PRESENT_BOTH if b.item_id in left_set else PRESENT_SERVER) if b else None,
            in_process_score_kind=score_kind(a) if a else None,
            server_score_kind=score_kind(b) if b else None,
        ))
    live_ids = {
        i.item_id for i in items
        if not i.evicted and (i.session_id is None or i.session_id == ctx.session_id)
    }
    return QueryDiff(
        query_id=query_id,
        in_process=left,
        server=right,
        rows=rows,
        metrics=compare_rankings(left_ids, right_ids, k=k or ctx.top_k, p=p),
        moves=rank_moves(left_ids, right_ids),
        notes=divergence_notes(ctx, server, in_process=left, server_units=right,
                               live_ids=live_ids, items_origin=items_origin, items=items,
                               agree=left_ids == right_ids),
        settings=_settings(ctx),
        exact_ranking=truth,
        exact=None if truth is None else compare_to_exact(
            right_ids, [u.item_id for u in truth], k=k or ctx.top_k),
    )


def diff_queries(
    base: RetrievalContext,
    specs: Sequence[QuerySpec],
    *,
    items: Sequence[MemoryItem],
    server: Any,
    p: float = 0.9,
    k: int | None = None,
    items_origin: str = "live",
    min_rbo: float | None = None,
    min_jaccard: float | None = None,
    exact: bool = False,
    min_recall: float | None = None,
) -> DiffReport:
    """Every query of a run, per-query and aggregate metrics, and the gate verdict.
    ``min_recall`` (recall@k against exact search) implies ``exact``."""
    exact = exact or min_recall is not None
    diffs = []
    for spec in specs:
        vector, text = resolve_query(spec, items)
        ctx = replace(base, query_embedding=vector, query_text=text, **dict(spec.overrides))
        diffs.append(diff_query(ctx, items=items, server=server, query_id=spec.query_id,
                                p=p, k=k, items_origin=items_origin, exact=exact))
        diffs[-1].text, diffs[-1].like = spec.text, spec.like
    thresholds = {name: value for name, value in (("min_rbo", min_rbo), ("min_jaccard", min_jaccard),
                                                  ("min_recall", min_recall)) if value is not None}
    report = DiffReport(queries=diffs, aggregate=aggregate(diffs),
                        server=getattr(server, "name", type(server).__name__),
                        thresholds=thresholds)
    report.misses = evaluate_gates(report.queries, min_rbo=min_rbo, min_jaccard=min_jaccard,
                                   min_recall=min_recall)
    return report


def aggregate(diffs: Sequence[QueryDiff]) -> dict[str, Any]:
    """Mean and minimum of RBO, Jaccard, overlap and tau-b (tau over the queries where it
    is defined), and the query with the lowest RBO; when queries were measured against
    exact search, the mean and minimum recall@k and Jaccard@k against it too
    (``*_exact_recall``, ``*_exact_jaccard``, ``worst_recall_query``)."""
    def stats(values: list[float]) -> tuple[float | None, float | None]:
        return (sum(values) / len(values), min(values)) if values else (None, None)

    out: dict[str, Any] = {"queries": len(diffs)}
    for metric in ("rbo", "jaccard", "overlap", "kendall_tau_b"):
        values = [getattr(d.metrics, metric) for d in diffs]
        mean, low = stats([v for v in values if v is not None])
        out[f"mean_{metric}"], out[f"min_{metric}"] = mean, low
    out["tau_undefined"] = sum(1 for d in diffs if d.metrics.kendall_tau_b is None)
    out["worst_query"] = min(diffs, key=lambda d: (d.metrics.rbo, d.query_id)).query_id if diffs else None
    measured = [(d.exact, d.query_id) for d in diffs if d.exact is not None]
    if measured:
        for metric in ("recall", "jaccard"):
            mean, low = stats([getattr(exact, metric) for exact, _q in measured])
            out[f"mean_exact_{metric}"], out[f"min_exact_{metric}"] = mean, low
        out["worst_recall_query"] = min(measured, key=lambda m: (m[0].recall, m[1]))[1]
    return out


def evaluate_gates(
    diffs: Sequence[QueryDiff], *, min_rbo: float | None = None, min_jaccard: float | None = None,
    min_recall: float | None = None,
) -> list[GateMiss]:
    """The queries whose RBO, Jaccard or recall against exact search fall below a
    threshold (each miss named; metric ``"recall"`` for the last)."""
    misses = []
    for d in diffs:
        if min_rbo is not None and d.metrics.rbo < min_rbo:
            misses.append(GateMiss(d.query_id, "rbo", d.metrics.rbo, min_rbo))
        if min_jaccard is not None and d.metrics.jaccard < min_jaccard:
            misses.append(GateMiss(d.query_id, "jaccard", d.metrics.jaccard, min_jaccard))
        if min_recall is not None and d.exact is not None and d.exact.recall < min_recall:
            misses.append(GateMiss(d.query_id, "recall", d.exact.recall, min_recall))
    return misses
