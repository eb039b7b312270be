"""Retrieval: the shared rules, the in-process pipeline and ranking-agreement metrics.

Stable API (other backends import these; do not re-implement them):

- ``fetch_width(ctx) -> int`` — candidates to pull before narrowing.
- ``narrowing_stage(ctx) -> "rerank" | "mmr" | "slice"`` — which single stage narrows.
- ``wants_lexical(ctx) -> bool`` — whether the lexical signal runs (BM25 on and text).
- ``apply_narrowing(ctx, candidates, *, emit=None) -> list[MemoryUnit]`` — runs that
  stage over candidate ``MemoryUnit`` objects (best first, with ``embedding`` set if MMR
  may run) and returns at most ``ctx.top_k``. ``emit(stage, payload)`` is an optional
  trace hook; server-side retrievers that declare ``stage`` inert pass nothing.
- ``rrf_fuse(rankings, weights=None, *, k=60, key=None, limit=None, ties="key")
  -> list[FusedItem]`` — weighted reciprocal-rank fusion; ``FusedItem(key, item, score,
  ranks)``. Elements may be ids, objects with ``item_id`` or dicts with ``"item_id"``;
  ties by key, or by first appearance (``ties="first"``, the engine's order); ``k=None``
  reads ``SEMVEC_RRF_K`` (else 60).
- ``InProcessRetrievalBackend`` (name ``"in-process"``), loaded lazily.
- metrics (``backends.retrieval.metrics``) and the diff engine
  (``backends.retrieval.diff``) are imported from their modules.

Server-side retrievers should expose ``name``, ``inert_fields: frozenset[str]`` (the
RetrievalContext fields they ignore) and, optionally, ``signals: tuple[str, ...]``
(e.g. ``("semantic", "lexical", "recency")``) and ``result_notes(ctx, units)``;
``retrieve diff`` reads them to explain divergence. An adapter offers its server-side
retriever through ``server_retriever()`` (``backends.contract.ServerRetrieval``), never
through the engine's ``retrieval_backend()``. Importing this package never imports numpy.
"""

from __future__ import annotations

from typing import Any

from backends.contract import MemoryItem, MemoryUnit, RetrievalBackend, RetrievalContext
from backends.retrieval.fusion import DEFAULT_RRF_K, FusedItem, item_key, rrf_fuse
from backends.retrieval.rules import (
    NARROWING_STAGES,
    STAGE_MMR,
    STAGE_RERANK,
    STAGE_SLICE,
    apply_narrowing,
    fetch_width,
    mmr_select,
    narrowing_stage,
    wants_lexical,
)

__all__ = [
    "RetrievalContext",
    "MemoryItem",
    "MemoryUnit",
    "RetrievalBackend",
    "fetch_width",
    "narrowing_stage",
    "wants_lexical",
    "apply_narrowing",
    "mmr_select",
    "NARROWING_STAGES",
    "STAGE_RERANK",
    "STAGE_MMR",
    "STAGE_SLICE",
    "rrf_fuse",
    "FusedItem",
    "item_key",
    "DEFAULT_RRF_K",
    "InProcessRetrievalBackend",
]


def __getattr__(name: str) -> Any:
    # The pipeline module is only imported when asked for, keeping this package light.
    if name == "InProcessRetrievalBackend":
        from backends.retrieval.inprocess import InProcessRetrievalBackend

        return InProcessRetrievalBackend
    raise AttributeError(f"module 'backends.retrieval' has no attribute {name!r}")
