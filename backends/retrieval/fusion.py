"""Weighted reciprocal-rank fusion, shared by every retriever that fuses client-side.

``score(item) = sum_i w_i / (k + rank_i(item))`` with 1-based ranks (Cormack et al. 2009,
weighted). Decisions, so that every caller fuses the same way:

- an item listed twice in one list counts once, at its best (first) rank;
- a list whose weight is 0 adds nothing to any score, and an item that appears ONLY in
  zero-weight lists is left out (a zero weight means "signal off"; it must not add
  candidates). Its items still appear if another, weighted list has them;
- ties in the fused score are broken by the item key, ascending (``ties="key"``, the
  default, deterministic across runs and backends), or kept in order of first appearance
  with the lists taken in their order (``ties="first"``: a stable sort, which is how the
  engine's own fusion orders them, ENGINE-WIRE sections 8 and 8b).

The constant and the in-process weights resolve as the engine resolves them: the
caller's value, else ``SEMVEC_RRF_K`` / ``SEMVEC_RRF_WEIGHTS``, else 60 / 1.0 each
(:func:`effective_rrf_k`, :func:`effective_rrf_weights`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Hashable, Sequence, TypeVar

__all__ = ["FusedItem", "rrf_fuse", "item_key", "DEFAULT_RRF_K", "SERVER_SIGNAL_WEIGHTS",
           "TIES", "effective_rrf_k", "effective_rrf_weights"]

DEFAULT_RRF_K = 60

#: Fixed per-signal weights of server-side retrieval (MongoDB, pgvector). The caller's
#: ``rrf_weights`` weigh two signals (dense + BM25); there is no meaning-preserving map
#: onto three, so server-side fusion uses these instead. Dropping a signal (no query
#: text, BM25 off) leaves the others' weights as they are, which ranks exactly as
#: renormalising them would.
SERVER_SIGNAL_WEIGHTS: dict[str, float] = {"semantic": 0.5, "lexical": 0.3, "recency": 0.2}

T = TypeVar("T")

#: How :func:`rrf_fuse` orders equal scores: by key, or by first appearance.
TIES = ("key", "first")


def effective_rrf_k(value: float | None) -> float:
    """The RRF constant in force: ``value`` when given, else ``SEMVEC_RRF_K`` when it is
    an integer, else 60 (the engine reads the variable the same way)."""
    import os

    if value is not None:
        return value
    raw = os.environ.get("SEMVEC_RRF_K", "").strip()
    try:
        return int(raw) if raw else DEFAULT_RRF_K
    except ValueError:
        return DEFAULT_RRF_K


def effective_rrf_weights(value: Sequence[float] | None, n: int = 2) -> tuple[float, ...]:
    """The in-process fusion weights (dense, BM25): the caller's, else
    ``SEMVEC_RRF_WEIGHTS`` (``"1.0,0.4"``) when it parses as ``n`` numbers, else 1.0 each."""
    import os

    if value is not None:
        return tuple(float(w) for w in value)
    raw = os.environ.get("SEMVEC_RRF_WEIGHTS", "").strip()
    if raw:
        try:
            parsed = tuple(float(x) for x in raw.split(","))
        except ValueError:
            parsed = ()
        if len(parsed) == n:
            return parsed
    return (1.0,) * n


@dataclass(frozen=True)
class FusedItem(Generic[T]):
    """One fused result. ``item`` is the object as first seen in the earliest list that
    had it; ``ranks`` holds its 1-based rank per input list (None where absent)."""

    key: Any
    item: T
    score: float
    ranks: tuple[int | None, ...]


def item_key(item: Any) -> Hashable:
    """Default identity of a ranked element: a string/int itself, else its ``item_id``
    attribute (MemoryUnit, MemoryItem), else ``item["item_id"]`` (documents)."""
    if isinstance(item, (str, int)):
        return item
    key = getattr(item, "item_id", None)
    if key is not None:
        return key
    if isinstance(item, dict) and "item_id" in item:
        return item["item_id"]
    raise TypeError(f"cannot derive an item key from {type(item).__name__}; pass key=")


def rrf_fuse(
    rankings: Sequence[Sequence[T]],
    weights: Sequence[float] | None = None,
    *,
    k: float | None = DEFAULT_RRF_K,
    key: Callable[[T], Hashable] | None = None,
    limit: int | None = None,
    ties: str = "key",
) -> list[FusedItem[T]]:
    """Fuse ranked lists (best first) into one list of :class:`FusedItem`, best first.

    ``weights`` defaults to 1.0 per list and must have one non-negative number per list;
    ``k`` must not be negative (None: :func:`effective_rrf_k`). ``limit`` truncates the fused list. ``ties`` is ``"key"``
    or ``"first"`` (see the module docstring).
    """
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} ranked lists")
    weights = [float(w) for w in weights]
    if any(w < 0 or w != w for w in weights):
        raise ValueError(f"fusion weights must be non-negative numbers, got {weights}")
    k = effective_rrf_k(k)
    if k < 0:
        raise ValueError(f"rrf k must not be negative, got {k}")
    get_key = key or item_key
    n_lists = len(rankings)
    scores: dict[Hashable, float] = {}
    first_seen: dict[Hashable, T] = {}
    ranks: dict[Hashable, list[int | None]] = {}
    for list_index, (ranking, weight) in enumerate(zip(rankings, weights)):
        for position, element in enumerate(ranking, start=1):
            ident = get_key(element)
            slot = ranks.get(ident)
            if slot is None:
                slot = ranks[ident] = [None] * n_lists
                first_seen[ident] = element
            if slot[list_index] is not None:
                continue  # a duplicate within one list counts once, at its best rank
            slot[list_index] = position
            if weight > 0:
                scores[ident] = scores.get(ident, 0.0) + weight / (k + position)
    if ties == "first":  # stable: equal scores keep the order they were first scored in
        ordered = sorted(scores.items(), key=lambda kv: -kv[1])
    else:
        ordered = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    if limit is not None:
        ordered = ordered[: max(limit, 0)]
    return [
        FusedItem(key=ident, item=first_seen[ident], score=score, ranks=tuple(ranks[ident]))
        for ident, score in ordered
    ]
