"""How much two rankings agree: overlap and Jaccard at k, rank-biased overlap, Kendall
tau-b over the shared items, and per-item rank moves.

Rankings are sequences of distinct item ids, best first (a repeated id keeps its first
rank). Pure Python: no numpy, no scipy.

References: W. Webber, A. Moffat, J. Zobel, "A similarity measure for indefinite
rankings", ACM TOIS 28(4), 2010 (RBO; ``rbo_ext`` is its extrapolated point estimate,
eq. 32 for lists of unequal length); M. G. Kendall, "The treatment of ties in ranking
problems", Biometrika 33, 1945 (tau-b).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Hashable, Sequence

__all__ = [
    "overlap_at_k",
    "jaccard_at_k",
    "recall_at_k",
    "ExactAgreement",
    "compare_to_exact",
    "rbo_ext",
    "kendall_tau_b",
    "rank_moves",
    "RankMove",
    "RankingAgreement",
    "compare_rankings",
    "SIDE_BOTH",
    "SIDE_A_ONLY",
    "SIDE_B_ONLY",
]

SIDE_BOTH = "both"
SIDE_A_ONLY = "a_only"
SIDE_B_ONLY = "b_only"


def _dedupe(ranking: Sequence[Hashable]) -> list[Hashable]:
    seen: set[Hashable] = set()
    out = []
    for item in ranking:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def overlap_at_k(a: Sequence[Hashable], b: Sequence[Hashable], k: int) -> float:
    """Shared items among the first ``k`` of each, over the longer of the two prefixes
    (= ``k`` when both lists reach ``k``; two short identical lists score 1.0, not
    ``len/k``). Two empty prefixes agree fully: 1.0."""
    if k < 1:
        raise ValueError("k must be at least 1")
    top_a, top_b = set(_dedupe(a)[:k]), set(_dedupe(b)[:k])
    denominator = max(len(top_a), len(top_b))
    return 1.0 if denominator == 0 else len(top_a & top_b) / denominator


def jaccard_at_k(a: Sequence[Hashable], b: Sequence[Hashable], k: int) -> float:
    """|A_k ∩ B_k| / |A_k ∪ B_k|; two empty prefixes give 1.0."""
    if k < 1:
        raise ValueError("k must be at least 1")
    top_a, top_b = set(_dedupe(a)[:k]), set(_dedupe(b)[:k])
    union = top_a | top_b
    return 1.0 if not union else len(top_a & top_b) / len(union)


def recall_at_k(approximate: Sequence[Hashable], exact: Sequence[Hashable], k: int) -> float:
    """Share of the exact top-``k`` that the approximate top-``k`` found:
    ``|A_k ∩ E_k| / |E_k|``. When exact search finds nothing there is nothing to miss: 1.0."""
    if k < 1:
        raise ValueError("k must be at least 1")
    top_a, top_e = set(_dedupe(approximate)[:k]), set(_dedupe(exact)[:k])
    return 1.0 if not top_e else len(top_a & top_e) / len(top_e)


def rbo_ext(a: Sequence[Hashable], b: Sequence[Hashable], p: float = 0.9) -> float:
    """Extrapolated rank-biased overlap (Webber et al. 2010, eq. 32), in [0, 1].

    With ``s`` the shorter and ``l`` the longer length and ``X_d`` the overlap of the
    two depth-``d`` prefixes (the short list counts whole once ``d > s``)::

        RBO_ext = (1-p)/p * ( sum_{d=1..l} X_d/d p^d + sum_{d=s+1..l} X_s (d-s)/(s d) p^d )
                  + ((X_l - X_s)/l + X_s/s) p^l

    It assumes the agreement seen so far continues past the evaluated depth, so a list
    that is a prefix of the other scores 1. Equal lengths reduce to eq. 30. Two empty
    lists score 1.0; one empty and one not score 0.0.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be within (0, 1), got {p}")
    a, b = _dedupe(a), _dedupe(b)
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, l = len(short), len(long_)
    if l == 0:
        return 1.0
    if s == 0:
        return 0.0
    seen_short: set[Hashable] = set()
    seen_long: set[Hashable] = set()
    overlap = 0
    total = 0.0
    x_s = 0
    for d in range(1, l + 1):
        item_l = long_[d - 1]
        if d <= s:
            item_s = short[d - 1]
            if item_s == item_l:
                overlap += 1
            else:
                overlap += (item_s in seen_long) + (item_l in seen_short)
            seen_short.add(item_s)
        else:
            overlap += item_l in seen_short
        seen_long.add(item_l)
        if d == s:
            x_s = overlap
        total += overlap / d * p**d
        if d > s:
            total += x_s * (d - s) / (s * d) * p**d
    x_l = overlap
    return (1.0 - p) / p * total + ((x_l - x_s) / l + x_s / s) * p**l


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two paired score/rank sequences, ties allowed:
    ``(C - D) / sqrt((n0 - n1)(n0 - n2))``. None when undefined (fewer than two pairs, or
    one side entirely tied). O(n^2): meant for top-k lists."""
    if len(x) != len(y):
        raise ValueError("tau-b needs paired sequences of equal length")
    n = len(x)
    concordant = discordant = tied_x = tied_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (x[i] > x[j]) - (x[i] < x[j])
            dy = (y[i] > y[j]) - (y[i] < y[j])
            if dx == 0 and dy == 0:
                tied_x += 1
                tied_y += 1
            elif dx == 0:
                tied_x += 1
            elif dy == 0:
                tied_y += 1
            elif dx == dy:
                concordant += 1
            else:
                discordant += 1
    n0 = n * (n - 1) // 2
    denominator = math.sqrt((n0 - tied_x) * (n0 - tied_y))
    if denominator == 0:
        return None
    return (concordant - discordant) / denominator


@dataclass(frozen=True)
class RankMove:
    """Where an item sits on each side (1-based; None = absent). ``delta`` is
    ``rank_b - rank_a`` (positive: lower on side b), None unless on both sides."""

    item: Hashable
    rank_a: int | None
    rank_b: int | None
    delta: int | None
    side: str


def rank_moves(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[RankMove]:
    """Every item of either ranking, in side-a order, then side-b-only items in side-b
    order."""
    a, b = _dedupe(a), _dedupe(b)
    rank_b = {item: r for r, item in enumerate(b, 1)}
    moves = []
    for r, item in enumerate(a, 1):
        other = rank_b.get(item)
        if other is None:
            moves.append(RankMove(item, r, None, None, SIDE_A_ONLY))
        else:
            moves.append(RankMove(item, r, other, other - r, SIDE_BOTH))
    in_a = set(a)
    moves.extend(
        RankMove(item, None, r, None, SIDE_B_ONLY) for r, item in enumerate(b, 1) if item not in in_a
    )
    return moves


@dataclass(frozen=True)
class RankingAgreement:
    """All agreement figures for one pair of rankings, evaluated at depth ``k``."""

    k: int
    p: float
    overlap: float
    jaccard: float
    rbo: float
    kendall_tau_b: float | None
    common: int
    only_a: int
    only_b: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ExactAgreement:
    """How close an approximate ranking is to exact search of the same store and filter,
    at depth ``k``: recall (share of the exact top-k found) and Jaccard, with the ids
    exact search ranked that the approximate side missed, and the ones it put instead."""

    k: int
    recall: float
    jaccard: float
    missed: tuple[Hashable, ...]
    extra: tuple[Hashable, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "recall": self.recall, "jaccard": self.jaccard,
                "missed": list(self.missed), "extra": list(self.extra)}


def compare_to_exact(approximate: Sequence[Hashable], exact: Sequence[Hashable], *,
                     k: int) -> ExactAgreement:
    top_a, top_e = _dedupe(approximate)[:k], _dedupe(exact)[:k]
    in_a, in_e = set(top_a), set(top_e)
    return ExactAgreement(
        k=k,
        recall=recall_at_k(top_a, top_e, k),
        jaccard=jaccard_at_k(top_a, top_e, k),
        missed=tuple(i for i in top_e if i not in in_a),
        extra=tuple(i for i in top_a if i not in in_e),
    )


def compare_rankings(
    a: Sequence[Hashable], b: Sequence[Hashable], *, k: int | None = None, p: float = 0.9
) -> RankingAgreement:
    """Metrics at depth ``k`` (default: the longer list, at least 1). RBO is computed on
    the two top-``k`` prefixes; tau-b on the items both prefixes share, in their order."""
    a, b = _dedupe(a), _dedupe(b)
    depth = k if k is not None else max(len(a), len(b), 1)
    top_a, top_b = a[:depth], b[:depth]
    rank_b = {item: r for r, item in enumerate(top_b)}
    common = [item for item in top_a if item in rank_b]
    tau = kendall_tau_b(list(range(len(common))), [rank_b[i] for i in common])
    return RankingAgreement(
        k=depth,
        p=p,
        overlap=overlap_at_k(top_a, top_b, depth),
        jaccard=jaccard_at_k(top_a, top_b, depth),
        rbo=rbo_ext(top_a, top_b, p),
        kendall_tau_b=tau,
        common=len(common),
        only_a=len(top_a) - len(common),
        only_b=len(top_b) - len(common),
    )
