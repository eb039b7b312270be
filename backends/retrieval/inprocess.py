"""The in-process retriever, step for step as the engine's ``InProcessRetrievalBackend``
ranks (ENGINE-WIRE section 8), so that ``retrieve diff`` blames the server side only for
differences that are the server side's. Each step is one named function:

1. :func:`document_order` — the session's units as the engine holds them: the tiers
   short_term + medium_term + long_term, each in its own order (an item's ``positions``
   when the source recorded them, else the source's order); a unit in two tiers is there
   twice.
2. :func:`cosine_candidates` — ``fetch_width`` units by cosine x tier weight
   (:data:`TIER_WEIGHTS`; a unit in several tiers takes its best), keeping only the best
   unit per 80-character text prefix (:func:`text_prefix`) BEFORE the cut to the width.
3. :func:`bm25_hits` — BM25 over the documents of step 1 with empty texts skipped,
   always ``min(bm25_fetch_k, documents)`` hits (zero scores included), ties and the
   zero tail by document position.
4. :func:`fuse_candidates` — reciprocal-rank fusion keyed by the embedding's identity
   (:func:`embedding_key`: units sharing a vector are one candidate, mapped back to the
   first such cosine candidate, then the first such document), k and weights as
   :func:`~backends.retrieval.fusion.effective_rrf_k` / ``effective_rrf_weights``
   resolve them, equal scores in insertion order (cosine candidates first), NO cut.
5. the shared narrowing (:func:`backends.retrieval.rules.apply_narrowing`).

Scores say what they are: ``meta["score_kind"]`` is ``"tier-weighted cosine"``,
``"bm25"`` or ``"fused"``, and ``meta`` keeps each signal's rank and score. An item with
no tier counts as short_term; an unknown tier name weighs 1.0 and follows long_term.

Exact cosine ties between distinct units: the engine's order among them is unspecified
(it varies from run to run, observed with 0.8.9); ours is document order.

Our extensions beyond the engine (it always has a query embedding): a text-only query
ranks by BM25 alone (real matches only, the first ``fetch_width``), and
``fuse_with_bm25=False`` lets BM25 only widen the pool.

Everything that depends only on the item list (filters, document order, the normalised
matrix, the BM25 index) is built once per list and kept in a small LRU cache; a ``tuple``
is recognised by identity, a ``list`` item by item, so in-place edits are never served
stale.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable, Sequence

from backends.contract import (
    UNSCOPED,
    MemoryItem,
    MemoryUnit,
    RetrievalContext,
    owner_matches,
    validate_owner_filter,
)
from backends.retrieval.fusion import effective_rrf_k, effective_rrf_weights, rrf_fuse
from backends.retrieval.items import TIER_ORDER, item_tier_list
from backends.retrieval.rules import apply_narrowing, fetch_width, wants_lexical

__all__ = [
    "InProcessRetrievalBackend",
    "TIER_ORDER",
    "TIER_WEIGHTS",
    "PREFIX_CHARS",
    "SCORE_COSINE",
    "SCORE_BM25",
    "SCORE_FUSED",
    "item_tiers",
    "tier_weight",
    "text_prefix",
    "embedding_key",
    "document_order",
    "cosine_candidates",
    "bm25_documents",
    "bm25_hits",
    "fuse_candidates",
]

#: ``SemvecConfig`` defaults: the weight a tier's cosine is multiplied by.
TIER_WEIGHTS = {"short_term": 1.0, "medium_term": 0.95, "long_term": 0.9}
#: Units whose texts agree in this many leading characters are one candidate.
PREFIX_CHARS = 80

SCORE_COSINE = "tier-weighted cosine"
SCORE_BM25 = "bm25"
SCORE_FUSED = "fused"


#: The tiers an item sits in (``tiers``, else ``tier``, else short_term).
item_tiers = item_tier_list


def tier_weight(item: MemoryItem) -> float:
    """The best weight among the item's tiers (1.0 for a tier the engine has no weight for)."""
    return max(TIER_WEIGHTS.get(t, 1.0) for t in item_tiers(item))


def text_prefix(text: str | None) -> str:
    """What the candidate de-duplication compares: the first 80 characters, exactly."""
    return (text or "")[:PREFIX_CHARS]


def embedding_key(item: MemoryItem) -> Hashable:
    """The fusion identity: the embedding itself (the engine keys by a hash of it), so
    units that share a vector are one candidate; an item without one is its own."""
    if item.embedding is None:
        return ("item", item.item_id)
    return tuple(float(x) for x in item.embedding)


def document_order(items: Sequence[MemoryItem]) -> list[int]:
    """Indices into ``items`` in the engine's document order: every tier of
    :data:`TIER_ORDER` (then unknown tiers, first seen first), each in its own order
    (recorded ``positions``, else the source order); an item in two tiers appears twice."""
    tiers: list[str] = list(TIER_ORDER)
    members: dict[str, list[tuple[tuple, int]]] = {t: [] for t in TIER_ORDER}
    for index, item in enumerate(items):
        for tier in item_tiers(item):
            if tier not in members:
                tiers.append(tier)
                members[tier] = []
            pos = item.positions.get(tier) if item.positions else None
            members[tier].append(((0, pos, index) if pos is not None else (1, index, index), index))
    out: list[int] = []
    for tier in tiers:
        out.extend(index for _key, index in sorted(members[tier], key=lambda m: m[0]))
    return out


def cosine_candidates(cosine: Any, weights: Any, texts: Sequence[str], first_doc: Sequence[int],
                      width: int) -> list[tuple[int, float, float]]:
    """``(row, tier-weighted cosine, cosine)`` of the best ``width`` rows, best first:
    rows ranked by ``cosine * weights`` (ties by ``first_doc``, the row's first document
    position), and among rows whose texts share their first 80 characters only the best
    kept, before the cut (the list is filled with the next rows)."""
    import numpy as np

    if width <= 0 or len(cosine) == 0:
        return []
    weighted = cosine * weights
    order = np.lexsort((np.asarray(first_doc, dtype=np.int64), -weighted))
    out: list[tuple[int, float, float]] = []
    seen: set[str] = set()
    for row in order.tolist():
        prefix = text_prefix(texts[row])
        if prefix in seen:
            continue
        seen.add(prefix)
        out.append((row, float(weighted[row]), float(cosine[row])))
        if len(out) >= width:
            break
    return out


def bm25_documents(items: Sequence[MemoryItem], order: Sequence[int]) -> list[int]:
    """The BM25 documents: ``order`` without the units whose text is empty."""
    return [index for index in order if items[index].text]


def bm25_hits(index: Any, query_text: str | None, k: int) -> list[tuple[int, float]]:
    """``(document position, score)`` of the ``min(k, documents)`` best documents, as
    bm25s returns them (zero scores fill the tail, in document order)."""
    positions, scores = index.top(query_text, k)
    return list(zip(positions.tolist(), scores.tolist()))


def fuse_candidates(dense_keys: Sequence[Hashable], bm25_keys: Sequence[Hashable],
                    weights: Sequence[float], k: float) -> list[tuple[Hashable, float]]:
    """The engine's fusion of the two key lists: ``w / (k + rank)``, 1-based ranks, a
    repeat counted once but still taking a rank, a zero-weight list skipped, equal scores
    in insertion order (dense keys first), no cut."""
    fused = rrf_fuse([list(dense_keys), list(bm25_keys)], list(weights), k=k,
                     key=lambda key: key, ties="first")
    return [(f.key, f.score) for f in fused]


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
        self.order = document_order(live)
        first_doc: dict[int, int] = {}
        for doc, index in enumerate(self.order):
            first_doc.setdefault(index, doc)
        self.documents = bm25_documents(live, self.order)
        self.keys = [embedding_key(i) for i in live]
        # key -> item index: the first unit per key in document order (fusion maps
        # BM25-only keys back through this)
        self.key_owner: dict[Hashable, int] = {}
        for index in self.order:
            self.key_owner.setdefault(self.keys[index], index)

        rows = [k for k, i in enumerate(live) if i.embedding is not None]
        self.dense_pos = np.asarray(rows, dtype=np.int64)
        self.row_first_doc = [first_doc[k] for k in rows]
        self.row_texts = [live[k].text for k in rows]
        self.row_weights = np.asarray([tier_weight(live[k]) for k in rows], dtype=np.float64)
        self.dims: int | None = None
        self.matrix = None
        if rows:
            try:
                matrix = np.asarray([live[k].embedding for k in rows], dtype=np.float64)
            except ValueError as exc:
                raise ValueError("live items have embeddings of different lengths") from exc
            if matrix.ndim != 2:
                raise ValueError("live items have embeddings of different lengths")
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

                self._bm25 = BM25Index([self.items[i].text for i in self.documents])
            return self._bm25


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

        # step 2: tier-weighted cosine candidates, one per text prefix
        dense: list[int] = []  # item indices, best first
        dense_rank: dict[int, tuple[int, float, float]] = {}
        if ctx.query_embedding is not None and corpus.matrix is not None:
            query = np.asarray(ctx.query_embedding, dtype=np.float64).reshape(-1)
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
            picked = cosine_candidates(cosine, corpus.row_weights, corpus.row_texts,
                                       corpus.row_first_doc, width)
            for rank, (row, weighted, cos) in enumerate(picked, 1):
                index = int(corpus.dense_pos[row])
                dense.append(index)
                dense_rank[index] = (rank, weighted, cos)

        # step 3: BM25 over the engine's documents
        bm25: list[int] = []  # item index per hit, in hit order (repeats kept)
        bm25_rank: dict[int, tuple[int, float]] = {}
        if want_bm25 and corpus.documents and (dense or ctx.query_embedding is None):
            if dense:
                hits = bm25_hits(corpus.bm25(), ctx.query_text, max(ctx.bm25_fetch_k, 1))
            else:  # text-only query (ours): real matches only, the first `width`
                hits = [h for h in bm25_hits(corpus.bm25(), ctx.query_text, width) if h[1] > 0]
            for rank, (doc, score) in enumerate(hits, 1):
                index = corpus.documents[doc]
                bm25.append(index)
                bm25_rank.setdefault(index, (rank, score))
        if emit is not None:
            emit("retrieve", {"live": len(corpus.items),
                              "dense": [corpus.items[i].item_id for i in dense],
                              "bm25": [corpus.items[i].item_id for i in bm25]})

        # step 4: fusion keyed by the embedding, no cut
        if dense and bm25 and ctx.fuse_with_bm25:
            weights = effective_rrf_weights(ctx.rrf_weights)
            k = effective_rrf_k(ctx.rrf_k)
            owner_of: dict[Hashable, int] = {}
            for index in dense:
                owner_of.setdefault(corpus.keys[index], index)
            fused = fuse_candidates([corpus.keys[i] for i in dense],
                                    [corpus.keys[i] for i in bm25], weights, k)
            ranked: list[tuple[int, float, str]] = []
            for key, score in fused:
                found = owner_of.get(key, corpus.key_owner.get(key))
                if found is not None:
                    ranked.append((found, score, SCORE_FUSED))
            if emit is not None:
                emit("fuse", {"k": k, "weights": tuple(weights),
                              "items": [corpus.items[i].item_id for i, _, _ in ranked]})
        elif dense:
            ranked = [(i, dense_rank[i][1], SCORE_COSINE) for i in dense]
            if bm25 and not ctx.fuse_with_bm25:
                # No fusion asked for (ours): BM25 only widens the pool; lexical-only
                # hits follow the dense ones, scored by their own tier-weighted cosine.
                extra = list(dict.fromkeys(i for i in bm25 if i not in dense_rank))
                ranked += [(i, self._weighted_cosine(i, cosine, corpus), SCORE_COSINE)
                           for i in extra]
        else:
            ranked = [(i, bm25_rank[i][1], SCORE_BM25) for i in dict.fromkeys(bm25)]

        candidates = [self._unit(corpus.items[index], score, kind,
                                 dense_rank.get(index), bm25_rank.get(index))
                      for index, score, kind in ranked]
        return apply_narrowing(ctx, candidates, emit=emit)

    # -- what the engine may order differently -------------------------------------
    def ordering_notes(self, ctx: RetrievalContext) -> list[tuple[str, str]]:
        """``(code, message)`` for what this ranking cannot know of the engine's order
        (the same live units :meth:`search` ranks):

        - ``positions-unknown``: units without a recorded position in a tier they sit in,
          when the units sit in several tiers (in ONE tier the order given is the
          position: nothing to say); the message names how many.
        - ``bm25-ties-numpy1``: BM25 is on and distinct units tie on score at the cut
          (among the hits BM25 hands to fusion, or the last one in and the first left
          out): an engine on numpy 1.x orders those ties differently."""
        validate_owner_filter(ctx.owner_subject)
        corpus = self._corpus(ctx.memory or (), ctx)
        notes: list[tuple[str, str]] = []
        tiers = {t for item in corpus.items for t in item_tiers(item)}
        if len(tiers) > 1:
            unknown = [item for item in corpus.items
                       if not set(item_tiers(item)) <= set(item.positions or {})]
            if unknown:
                notes.append(("positions-unknown", (
                    f"{len(unknown)} of {len(corpus.items)} unit(s) have no recorded position "
                    f"in their tier and the units sit in {len(tiers)} tiers (a mirror the engine "
                    "wrote without positions, or items without 'positions'): in-process used the "
                    "order given, the engine's order among them may differ (BM25 ties, the "
                    "zero-score tail and exact cosine ties)")))
        tied = self._bm25_ties_at_cut(ctx, corpus)
        if tied:
            count, cut = tied
            notes.append(("bm25-ties-numpy1", (
                f"{count} BM25 hit(s) tie on score at the cut of {cut} (bm25s orders ties by "
                "document position on numpy 2.x): an engine on numpy 1.x orders BM25 ties "
                "differently, which can change this result")))
        return notes

    @staticmethod
    def _bm25_ties_at_cut(ctx: RetrievalContext, corpus: "_Corpus") -> tuple[int, int] | None:
        """``(hits in a tie, the cut)`` when distinct units share a BM25 score among the
        hits handed to fusion (or across the cut), else None; None when BM25 does not run."""
        if not wants_lexical(ctx) or not corpus.documents:
            return None
        text_only = ctx.query_embedding is None
        if not text_only and corpus.matrix is None:
            return None  # no cosine candidates: search runs no BM25 either
        cut = fetch_width(ctx) if text_only else max(ctx.bm25_fetch_k, 1)
        hits = bm25_hits(corpus.bm25(), ctx.query_text, cut + 1)
        if text_only:
            hits = [h for h in hits if h[1] > 0]
        groups: dict[float, set[int]] = {}
        for doc, score in hits:
            groups.setdefault(score, set()).add(corpus.documents[doc])
        inside = hits[:cut]
        count = sum(1 for _doc, score in inside if len(groups[score]) > 1)
        return (count, min(cut, len(corpus.documents))) if count else None

    @staticmethod
    def _weighted_cosine(index: int, cosine, corpus) -> float:
        import numpy as np

        row = int(np.searchsorted(corpus.dense_pos, index))
        if row < len(corpus.dense_pos) and corpus.dense_pos[row] == index:
            return float(cosine[row] * corpus.row_weights[row])
        return 0.0

    @staticmethod
    def _unit(item: MemoryItem, score: float, kind: str, dense, bm25) -> MemoryUnit:
        meta: dict[str, Any] = {"score_kind": kind}
        if dense is not None:
            meta["dense_rank"], meta["dense_score"], meta["cosine"] = dense
            meta["tier_weight"] = tier_weight(item)
        if bm25 is not None:
            meta["bm25_rank"], meta["bm25_score"] = bm25
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
