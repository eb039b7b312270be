"""The in-process retriever: cosine over the live items, optional BM25, weighted RRF,
then exactly one shared narrowing stage.

Per query it costs one float32 matrix-vector product and a partition: everything that
depends only on the item list (the live/owner/session filter, the normalised embedding
matrix, the id order used for tie-breaks, the BM25 index) is built once per item list
and kept in a small LRU cache. Hits are recognised by identity: a ``tuple`` of items is
recognised at once; a ``list`` is checked item by item (by identity, cheap but O(n)),
so in-place edits of a list are never served stale. Pass a tuple for the fastest path.

Item embeddings may be any float sequence (tuples, lists, numpy rows).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Sequence

from backends.contract import (
    UNSCOPED,
    MemoryItem,
    MemoryUnit,
    RetrievalContext,
    owner_matches,
    validate_owner_filter,
)
from backends.retrieval.fusion import rrf_fuse
from backends.retrieval.rules import apply_narrowing, fetch_width, wants_lexical

__all__ = ["InProcessRetrievalBackend"]


def _owner_key(owner: Any) -> tuple:
    if owner is UNSCOPED:
        return ("unscoped",)
    if owner is None:
        return ("unowned",)
    return ("owner", owner)


class _Corpus:
    """Everything about one (item list, session, owner filter) that queries reuse."""

    def __init__(self, source: Sequence[MemoryItem], session_id: str, owner: Any) -> None:
        import numpy as np

        self.source = source
        # For a mutable list, remember which objects it held (and keep them alive, so
        # their ids cannot be reused by new objects while this entry exists).
        self.held = None if isinstance(source, tuple) else tuple(source)
        self.fingerprint = None if self.held is None else list(map(id, self.held))
        live: list[MemoryItem] = []
        seen: set[str] = set()
        for item in source:
            if item.evicted or item.item_id in seen:
                continue  # evicted items never rank; a repeated id keeps its first copy
            if item.session_id is not None and item.session_id != session_id:
                continue
            if not owner_matches(item.owner_subject, owner):
                continue
            seen.add(item.item_id)
            live.append(item)
        self.items = live
        self.ids = [i.item_id for i in live]
        self.position = {item_id: k for k, item_id in enumerate(self.ids)}
        order = sorted(range(len(live)), key=self.ids.__getitem__)
        self.id_rank = np.empty(len(live), dtype=np.int64)
        self.id_rank[order] = np.arange(len(live), dtype=np.int64)

        # Dense side: rows for the items that carry an embedding.
        rows = [k for k, i in enumerate(live) if i.embedding is not None]
        self.dense_pos = np.asarray(rows, dtype=np.int64)
        self.dims: int | None = None
        self.matrix = None
        if rows:
            try:
                matrix = np.asarray([live[k].embedding for k in rows], dtype=np.float32)
            except ValueError as exc:
                raise ValueError("live items have embeddings of different lengths") from exc
            if matrix.ndim != 2:
                raise ValueError("live items have embeddings of different lengths")
            # einsum reads the matrix once with no temporary (linalg.norm squares a copy)
            norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
            norms[norms == 0.0] = 1.0
            matrix /= norms[:, None]
            self.matrix = matrix
            self.dims = matrix.shape[1]
        self._bm25 = None
        self._lock = threading.Lock()

    def same_source(self, source: Sequence[MemoryItem]) -> bool:
        if source is not self.source:
            return False
        if self.fingerprint is None:
            return True
        return len(source) == len(self.fingerprint) and list(map(id, source)) == self.fingerprint

    def bm25(self):
        with self._lock:
            if self._bm25 is None:
                from backends.retrieval.bm25 import BM25Index

                self._bm25 = BM25Index([i.text for i in self.items])
            return self._bm25


def _top(scores, positions, width: int, id_rank):
    """The ``width`` best ``positions`` by score, ties by item id; deterministic even at
    the cut (every position tied with the last kept score competes on id)."""
    import numpy as np

    n = len(positions)
    if n == 0 or width <= 0:
        return positions[:0], scores[:0]
    if width < n:
        threshold = np.partition(scores, n - width)[n - width]
        keep = np.flatnonzero(scores >= threshold)
        scores, positions = scores[keep], positions[keep]
    order = np.lexsort((id_rank[positions], -scores))[:width]
    return positions[order], scores[order]


class InProcessRetrievalBackend:
    """The engine's default retriever. Honours every RetrievalContext field."""

    name = "in-process"
    inert_fields: frozenset[str] = frozenset()
    signals: tuple[str, ...] = ("semantic", "lexical")

    def __init__(self, *, cache_size: int = 4) -> None:
        self._cache: OrderedDict[tuple, _Corpus] = OrderedDict()
        self._cache_size = max(int(cache_size), 0)
        self._lock = threading.Lock()

    # -- cache ---------------------------------------------------------------------
    def _corpus(self, memory: Sequence[MemoryItem], ctx: RetrievalContext) -> _Corpus:
        if not isinstance(memory, (list, tuple)):
            return _Corpus(tuple(memory), ctx.session_id, ctx.owner_subject)
        key = (id(memory), ctx.session_id, _owner_key(ctx.owner_subject))
        with self._lock:
            corpus = self._cache.get(key)
            if corpus is not None and corpus.same_source(memory):
                self._cache.move_to_end(key)
                return corpus
        corpus = _Corpus(memory, ctx.session_id, ctx.owner_subject)
        if self._cache_size:
            with self._lock:
                self._cache[key] = corpus
                self._cache.move_to_end(key)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return corpus

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    # -- search --------------------------------------------------------------------
    def search(self, ctx: RetrievalContext) -> list[MemoryUnit]:
        import numpy as np

        validate_owner_filter(ctx.owner_subject)
        width = fetch_width(ctx)
        want_bm25 = wants_lexical(ctx)
        if ctx.query_embedding is None and not want_bm25:
            raise ValueError(
                "in-process retrieval needs a query embedding, or query text with BM25 on"
            )
        emit = ctx.stage
        corpus = self._corpus(ctx.memory or (), ctx)
        if not corpus.items:
            if emit is not None:
                emit("retrieve", {"live": 0, "dense": [], "bm25": []})
            return []

        cosine = None
        dense_ids: list[str] = []
        dense_rank: dict[str, tuple[int, float]] = {}
        if ctx.query_embedding is not None and corpus.matrix is not None:
            query = np.asarray(ctx.query_embedding, dtype=np.float32).reshape(-1)
            if query.shape[0] != corpus.dims:
                raise ValueError(
                    f"query embedding has {query.shape[0]} dimensions, items have {corpus.dims}"
                )
            if not np.all(np.isfinite(query)):
                raise ValueError("query embedding must not contain NaN or infinity")
            qnorm = float(np.linalg.norm(query))
            if qnorm > 0:
                query = query / qnorm
            cosine = corpus.matrix @ query
            top_pos, top_scores = _top(cosine, corpus.dense_pos, width, corpus.id_rank)
            for rank, (pos, score) in enumerate(zip(top_pos.tolist(), top_scores.tolist()), 1):
                dense_ids.append(corpus.ids[pos])
                dense_rank[corpus.ids[pos]] = (rank, score)

        bm25_ids: list[str] = []
        bm25_rank: dict[str, tuple[int, float]] = {}
        if want_bm25:
            # As the engine: bm25_fetch_k documents from bm25s when there is a dense side
            # to fuse with, zero-score ones included. A text-only query (our extension:
            # the engine always has an embedding) takes the width and only real matches.
            if dense_ids:
                top_pos, top_scores = corpus.bm25().top(ctx.query_text, max(ctx.bm25_fetch_k, 1))
            else:
                top_pos, top_scores = corpus.bm25().top(ctx.query_text, width)
                top_pos, top_scores = top_pos[top_scores > 0], top_scores[top_scores > 0]
            for rank, (pos, score) in enumerate(zip(top_pos.tolist(), top_scores.tolist()), 1):
                bm25_ids.append(corpus.ids[pos])
                bm25_rank[corpus.ids[pos]] = (rank, score)
        if emit is not None:
            emit("retrieve", {"live": len(corpus.items), "dense": dense_ids, "bm25": bm25_ids})

        if dense_ids and bm25_ids and ctx.fuse_with_bm25:
            fused = rrf_fuse(
                [dense_ids, bm25_ids], list(ctx.rrf_weights), k=ctx.rrf_k, limit=width
            )
            ranked = [(f.key, f.score) for f in fused]
            if emit is not None:
                emit("fuse", {"k": ctx.rrf_k, "weights": tuple(ctx.rrf_weights),
                              "items": [key for key, _ in ranked]})
        elif dense_ids:
            ranked = [(i, dense_rank[i][1]) for i in dense_ids]
            if bm25_ids:
                # No fusion asked for: BM25 only widens the pool (lexical-only hits follow
                # the dense ones, scored by their own cosine) for the narrowing stage.
                extra = [i for i in bm25_ids if i not in dense_rank]
                ranked += [(i, self._cosine_of(i, cosine, corpus)) for i in extra]
        else:
            ranked = [(i, bm25_rank[i][1]) for i in bm25_ids]

        candidates = [
            self._unit(corpus.items[corpus.position[item_id]], score, dense_rank, bm25_rank)
            for item_id, score in ranked
        ]
        return apply_narrowing(ctx, candidates, emit=emit)

    @staticmethod
    def _cosine_of(item_id, cosine, corpus) -> float:
        import numpy as np

        pos = corpus.position[item_id]
        row = np.searchsorted(corpus.dense_pos, pos)
        if row < len(corpus.dense_pos) and corpus.dense_pos[row] == pos:
            return float(cosine[row])
        return 0.0

    @staticmethod
    def _unit(item: MemoryItem, score: float, dense_rank, bm25_rank) -> MemoryUnit:
        meta: dict[str, Any] = {}
        if item.item_id in dense_rank:
            meta["dense_rank"], meta["dense_score"] = dense_rank[item.item_id]
        if item.item_id in bm25_rank:
            meta["bm25_rank"], meta["bm25_score"] = bm25_rank[item.item_id]
        return MemoryUnit(
            item_id=item.item_id,
            text=item.text,
            score=float(score),
            tier=item.tier,
            embedding=item.embedding,
            updated_at=item.updated_at,
            owner_subject=item.owner_subject,
            session_id=item.session_id,
            meta=meta,
        )
