"""The two shared retrieval rules, and the one function that applies the second.

Every retriever (in-process, MongoDB server-side, pgvector, third-party) asks these
functions how wide to fetch and how to narrow, instead of deciding for itself: the two
sides of ``retrieve diff`` drifted apart precisely where a backend re-implemented them.

numpy is imported only inside :func:`mmr_select`, so importing this module stays cheap.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from backends.contract import MemoryUnit, RetrievalContext

__all__ = [
    "STAGE_RERANK",
    "STAGE_MMR",
    "STAGE_SLICE",
    "NARROWING_STAGES",
    "fetch_width",
    "narrowing_stage",
    "apply_narrowing",
    "mmr_select",
    "wants_lexical",
]

STAGE_RERANK = "rerank"
STAGE_MMR = "mmr"
STAGE_SLICE = "slice"
NARROWING_STAGES = (STAGE_RERANK, STAGE_MMR, STAGE_SLICE)

Emit = Callable[[str, Any], None]


def _check_ctx(ctx: RetrievalContext) -> None:
    for name in ("top_k", "bm25_fetch_k", "mmr_fetch_k"):
        value = getattr(ctx, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if ctx.top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {ctx.top_k}")
    if ctx.bm25_fetch_k < 0 or ctx.mmr_fetch_k < 0:
        raise ValueError("bm25_fetch_k and mmr_fetch_k must not be negative")


def fetch_width(ctx: RetrievalContext) -> int:
    """How many candidates to pull before the narrowing stage.

    With a reranker: ``max(top_k, bm25_fetch_k, mmr_fetch_k)`` (the reranker sees the
    widest pool any stage would). Without: ``mmr_fetch_k`` when it exceeds ``top_k``,
    else ``top_k``; and when BM25 is on (``ctx.use_bm25``, whether or not there is
    query text) at least ``bm25_fetch_k``.
    """
    _check_ctx(ctx)
    if ctx.reranker is not None:
        return max(ctx.top_k, ctx.bm25_fetch_k, ctx.mmr_fetch_k)
    width = ctx.mmr_fetch_k if ctx.mmr_fetch_k > ctx.top_k else ctx.top_k
    if ctx.use_bm25:
        width = max(width, ctx.bm25_fetch_k)
    return width


def wants_lexical(ctx: RetrievalContext) -> bool:
    """Whether the lexical (BM25) signal runs: BM25 is on AND the query has text that is
    not only white space. Widening (:func:`fetch_width`) follows ``use_bm25`` alone."""
    return bool(ctx.use_bm25 and ctx.query_text and ctx.query_text.strip())


def narrowing_stage(ctx: RetrievalContext) -> str:
    """Exactly one of ``"rerank"`` (a reranker is configured), ``"mmr"``
    (``mmr_fetch_k > top_k``) or ``"slice"``, in that order of precedence."""
    _check_ctx(ctx)
    if ctx.reranker is not None:
        return STAGE_RERANK
    if ctx.mmr_fetch_k > ctx.top_k:
        return STAGE_MMR
    return STAGE_SLICE


def apply_narrowing(
    ctx: RetrievalContext,
    candidates: Sequence[MemoryUnit],
    *,
    emit: Emit | None = None,
) -> list[MemoryUnit]:
    """Run the stage :func:`narrowing_stage` picks over ``candidates`` (best first) and
    return at most ``ctx.top_k`` units.

    - rerank: ``ctx.reranker(query_text or "", candidates)`` returns one score per
      candidate; units are ordered by that score (a stable sort: ties keep the pool's
      order, as the engine's), their ``score`` becomes the reranker's and the previous
      score is kept in ``meta["pre_rerank_score"]``.
    - mmr: :func:`mmr_select` with ``ctx.mmr_lambda``; scores are left as they were.
    - slice: the first ``top_k``.

    ``emit(stage, payload)`` is called once with the stage name when given; retrievers
    that do not trace (server-side ones declare ``stage`` inert) pass nothing.
    """
    stage = narrowing_stage(ctx)
    pool = list(candidates)
    if stage == STAGE_RERANK:
        result = _rerank(ctx, pool)
    elif stage == STAGE_MMR:
        result = mmr_select(
            pool, ctx.query_embedding, top_k=ctx.top_k, lambda_=ctx.mmr_lambda
        )
    else:
        result = pool[: ctx.top_k]
    if emit is not None:
        emit(stage, {"in": len(pool), "out": len(result), "items": [u.item_id for u in result]})
    return result


def _rerank(ctx: RetrievalContext, pool: list[MemoryUnit]) -> list[MemoryUnit]:
    if not pool:
        return []
    scores = list(ctx.reranker(ctx.query_text or "", pool))  # type: ignore[misc]
    if len(scores) != len(pool):
        raise ValueError(
            f"reranker returned {len(scores)} scores for {len(pool)} candidates"
        )
    rescored = [
        replace(unit, score=float(s), meta={**unit.meta, "pre_rerank_score": unit.score,
                                            "score_kind": "reranker"})
        for unit, s in zip(pool, scores)
    ]
    rescored.sort(key=lambda u: -u.score)  # stable: equal scores keep the pool's order
    return rescored[: ctx.top_k]


def mmr_select(
    candidates: Sequence[MemoryUnit],
    query_embedding: Sequence[float] | None,
    *,
    top_k: int,
    lambda_: float = 0.5,
) -> list[MemoryUnit]:
    """Maximal marginal relevance (Carbonell & Goldstein 1998), as the engine runs it.

    A pool of at most ``top_k`` is returned unchanged. Otherwise the first pick is the
    most relevant candidate whatever ``lambda_`` is, then each next one maximises
    ``lambda * rel(d) - (1 - lambda) * max_{s picked} cos(d, s)``; ties go to the first
    in the pool. ``rel(d)`` is the cosine between ``d`` and the query embedding; without
    a query embedding (a text-only query, ours) it is the candidate's own score. A
    candidate without an embedding cannot be compared for redundancy, so when any lacks
    one the stage degrades to a plain slice.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"mmr lambda must be within [0, 1], got {lambda_}")
    pool = list(candidates)
    if top_k < 1 or not pool:
        return []
    if len(pool) <= top_k:
        return pool
    if any(u.embedding is None for u in pool):
        return pool[:top_k]
    import numpy as np

    matrix = np.asarray([u.embedding for u in pool], dtype=np.float64)
    unit_rows = matrix / (np.linalg.norm(matrix, axis=1, keepdims=True) + 1e-12)
    if query_embedding is not None:
        query = np.asarray(query_embedding, dtype=np.float64)
        if query.shape != (matrix.shape[1],):
            raise ValueError(
                f"query embedding has {query.size} dimensions, items have {matrix.shape[1]}"
            )
        relevance = unit_rows @ (query / (float(np.linalg.norm(query)) + 1e-12))
    else:
        relevance = np.asarray([u.score for u in pool], dtype=np.float64)
    chosen: list[int] = []
    remaining = list(range(len(pool)))
    while remaining and len(chosen) < top_k:
        if not chosen:
            best = remaining[int(np.argmax(relevance[remaining]))]
        else:
            redundancy = (unit_rows[remaining] @ unit_rows[chosen].T).max(axis=1)
            mmr = lambda_ * relevance[remaining] - (1.0 - lambda_) * redundancy
            best = remaining[int(np.argmax(mmr))]  # argmax: ties to the first
        chosen.append(best)
        remaining.remove(best)
    return [pool[i] for i in chosen]
