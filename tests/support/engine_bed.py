"""A deterministic retrieval bed, the settings grid and the two ways to rank it: ours
(``InProcessRetrievalBackend``) and the engine's own ``InProcessRetrievalBackend.search``
driven the way its session drives it (a ``SemvecSession`` over a state whose tiers hold
the bed, its ``fuse_with_bm25`` and ``mmr_rerank``, a fresh BM25 index).

The bed: three tiers in the engine's sizes (short 12, medium 30, long 58 units), with
exact duplicates (same text and vector, across tiers and inside one tier), groups of
units sharing an 80-character text prefix, one unit in two tiers, and empty texts.
Exact duplicates inside one tier tie exactly, and the engine's order among exact ties is
unspecified, so rankings are compared on :func:`canonical` ids (one id per group of
indistinguishable units: same text and same vector).

``python -m tests.support.engine_bed`` (with the engine importable) re-records the golden
file ``tests/support/golden/inprocess_engine.json``: the bed, the queries and the
engine's ranking of every case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "golden" / "inprocess_engine.json"
DIMS = 16
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu invoice refund meeting budget deadline").split()
TIER_SIZES = (("short_term", 12), ("medium_term", 30), ("long_term", 58))

#: (name, use BM25, rrf weights, mmr_fetch_k, mmr lambda, bm25_fetch_k)
SETTINGS = (
    ("bm25-off", False, None, 0, 0.5, 50),
    ("bm25-on", True, None, 0, 0.5, 50),
    ("bm25-on-weighted", True, (1.0, 0.4), 0, 0.5, 50),
    ("bm25-on-narrow", True, None, 0, 0.5, 7),
    ("bm25-zero-dense-weight", True, (0.0, 1.0), 0, 0.5, 50),
    ("mmr", False, None, 20, 0.5, 50),
    ("mmr-lambda-0.2", False, None, 30, 0.2, 50),
    ("bm25-on-mmr", True, None, 20, 0.5, 50),
)
TOP_KS = (5, 10)


def build_bed(seed: int = 20261201) -> dict[str, Any]:
    """The bed as plain data: ``tiers`` ({tier: [unit, ...]} in tier order; a unit is
    ``{"id", "text", "embedding"}``) and ``queries`` ([{"id", "text", "vector"}])."""
    import numpy as np

    rng = np.random.default_rng(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS, size=n))

    def vec() -> list[float]:
        return [float(x) for x in rng.normal(size=DIMS)]

    tiers: dict[str, list[dict[str, Any]]] = {}
    counter = 0
    for tier, size in TIER_SIZES:
        units = []
        for _ in range(size):
            counter += 1
            units.append({"id": f"u{counter:03d}", "text": text(int(rng.integers(4, 12))),
                          "embedding": vec()})
        tiers[tier] = units
    short, medium, long_ = tiers["short_term"], tiers["medium_term"], tiers["long_term"]
    # exact duplicates across tiers (same text, same vector, another id)
    for n, (src, dst) in enumerate(((short[2], medium), (medium[5], long_), (short[7], long_))):
        dst[10 + n] = {"id": dst[10 + n]["id"], "text": src["text"], "embedding": src["embedding"]}
    # an exact duplicate inside one tier
    medium[20] = {"id": medium[20]["id"], "text": medium[3]["text"],
                  "embedding": medium[3]["embedding"]}
    # units sharing an 80-character prefix (and one sharing only 79)
    prefix = ("the quarterly budget meeting moved to thursday because the invoice refund "
              "deadline")[:80]
    assert len(prefix) == 80
    for n, (tier, at) in enumerate((("short_term", 4), ("medium_term", 8), ("medium_term", 9),
                                    ("long_term", 30), ("long_term", 31))):
        unit = tiers[tier][at]
        unit["text"] = prefix + f" variant {n} " + text(3)
    long_[32]["text"] = prefix[:79] + "X and more"
    # a unit held by two tiers (the same id)
    long_[40] = dict(short[9])
    # empty texts
    for tier, at in (("short_term", 11), ("medium_term", 25), ("long_term", 50)):
        tiers[tier][at]["text"] = ""
    units = [u for t in tiers.values() for u in t]
    queries = []
    for n in range(20):
        if n % 4 == 0:  # near a unit: a real top-1
            base = np.asarray(units[int(rng.integers(len(units)))]["embedding"])
            vector = base + 0.3 * rng.normal(size=DIMS)
        else:
            vector = rng.normal(size=DIMS)
        words = list(rng.choice(WORDS, size=int(rng.integers(1, 4))))
        if n % 5 == 0:
            words.append("nosuchword")
        queries.append({"id": f"q{n:02d}", "text": " ".join(words),
                        "vector": [float(x) for x in vector]})
    return {"dims": DIMS, "tiers": tiers, "queries": queries}


def our_items(bed: dict[str, Any]) -> tuple:
    """The bed as our MemoryItems: one per id, in first-seen tier order, with every tier
    it sits in and its position there."""
    from backends.contract import MemoryItem

    seen: dict[str, dict[str, Any]] = {}
    for tier, units in bed["tiers"].items():
        for pos, unit in enumerate(units):
            entry = seen.setdefault(unit["id"], {"unit": unit, "tiers": [], "positions": {}})
            entry["tiers"].append(tier)
            entry["positions"][tier] = pos
    return tuple(
        MemoryItem(item_id=uid, text=e["unit"]["text"], embedding=tuple(e["unit"]["embedding"]),
                   tier=e["tiers"][0], tiers=tuple(e["tiers"]), positions=e["positions"])
        for uid, e in seen.items())


def canonical(bed: dict[str, Any]) -> dict[str, str]:
    """id -> the first id of its group of indistinguishable units (same text and vector)."""
    first: dict[tuple, str] = {}
    out: dict[str, str] = {}
    for units in bed["tiers"].values():
        for unit in units:
            key = (unit["text"], tuple(unit["embedding"]))
            out[unit["id"]] = first.setdefault(key, unit["id"])
    return out


def cases(bed: dict[str, Any]):
    """Every (case id, query, setting, top_k)."""
    for setting in SETTINGS:
        for top_k in TOP_KS:
            for query in bed["queries"]:
                yield f"{setting[0]}/k{top_k}/{query['id']}", query, setting, top_k


def ours(bed: dict[str, Any], query, setting, top_k, items=None) -> list[str]:
    from backends.contract import RetrievalContext
    from backends.retrieval.inprocess import InProcessRetrievalBackend

    _name, use_bm25, weights, mmr_fetch_k, mmr_lambda, bm25_fetch_k = setting
    ctx = RetrievalContext(
        session_id="bed", memory=items if items is not None else our_items(bed),
        query_embedding=tuple(query["vector"]), query_text=query["text"], top_k=top_k,
        use_bm25=use_bm25, bm25_fetch_k=bm25_fetch_k, mmr_fetch_k=mmr_fetch_k,
        mmr_lambda=mmr_lambda, rrf_weights=weights)
    return [u.item_id for u in InProcessRetrievalBackend().search(ctx)]


def engine_session(bed: dict[str, Any], use_bm25: bool):
    """A ``SemvecSession`` whose tiers hold the bed, with a fresh BM25 index when on."""
    import numpy as np
    from semvec._core import SemvecConfig, SemvecState
    from semvec.api.hybrid_retrieval import SessionBM25Index
    from semvec.session import SemvecSession

    config = SemvecConfig(dimension=bed["dims"])
    state = SemvecState(config)
    for tier, units in bed["tiers"].items():
        for unit in units:
            state.memory.inject_memory(np.asarray(unit["embedding"], dtype=np.float64),
                                       unit["text"], tier, id=unit["id"])
    for tier, units in bed["tiers"].items():  # the engine kept the bed as given
        assert [u.id for u in getattr(state.memory, tier)] == [u["id"] for u in units], tier
    index = SessionBM25Index(rebuild_every=1) if use_bm25 else None
    return SemvecSession(state, None, config, bm25_index=index, enable_bm25=use_bm25)


def engine(session, query, setting, top_k) -> list[str]:
    """The engine's ranking, with the context its ``SemvecSession.run`` builds."""
    import asyncio
    import contextlib

    import numpy as np
    from semvec.retrieval_backend import RetrievalContext
    from semvec.session import mmr_rerank

    _name, _use_bm25, weights, mmr_fetch_k, mmr_lambda, bm25_fetch_k = setting

    @contextlib.contextmanager
    def stage(_name):
        yield {}

    ctx = RetrievalContext(
        query_embedding=np.asarray(query["vector"], dtype=np.float64), query_text=query["text"],
        memory=session.pss_state.memory, top_k=top_k, mmr_fetch_k=mmr_fetch_k,
        mmr_lambda=mmr_lambda, bm25_fetch_k=bm25_fetch_k, rrf_k=None,
        rrf_weights=list(weights) if weights is not None else None, reranker=None,
        wants_bm25=session.bm25_index is not None, fuse_with_bm25=session.fuse_with_bm25,
        mmr_rerank=mmr_rerank, stage=stage)
    return [u.id for u in asyncio.run(session._retrieval_backend.search(ctx))]


def engine_rankings(bed: dict[str, Any]) -> dict[str, list[str]]:
    sessions = {flag: engine_session(bed, flag) for flag in (False, True)}
    return {case_id: engine(sessions[setting[1]], query, setting, top_k)
            for case_id, query, setting, top_k in cases(bed)}


def record() -> None:
    bed = build_bed()
    GOLDEN.write_text(json.dumps({
        "recorded_with": "semvec 0.8.9 InProcessRetrievalBackend.search via SemvecSession",
        "bed": bed, "rankings": engine_rankings(bed)}, indent=None, sort_keys=True) + "\n",
        encoding="utf-8")


if __name__ == "__main__":
    record()
