"""``retrieval_backend()`` driven exactly the way the engine's session manager drives it
(ENGINE-WIRE section 6): called once with no arguments; when not None, every turn awaits
``search(ctx)`` with the engine's context, which names no session and no owner. A
retriever the engine cannot drive breaks retrieval on every turn, so each adapter must
either return None or something that answers that call. Our own server-side retrievers
are reached through the ``ServerRetrieval`` seam instead. Real PostgreSQL for pgvector;
MongoDB is the mongomock fake (item-sync on)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.fixtures.mongo import db_name, make_adapter, mongo_client  # noqa: F401

from backends.contract import (
    Capability,
    MemoryItem,
    RetrievalContext,
    capabilities_of,
    offers,
    server_retriever_of,
)


@dataclass(frozen=True)
class EngineRetrievalContext:
    """Shaped like the engine's RetrievalContext: its fields, and no session or owner."""

    query_embedding: Any
    query_text: str
    memory: Any
    top_k: int = 5
    mmr_fetch_k: int = 0
    mmr_lambda: float = 0.5
    bm25_fetch_k: int = 50
    rrf_k: int | None = None
    rrf_weights: list | None = None
    reranker: Any = None
    wants_bm25: bool = True
    fuse_with_bm25: Any = None
    mmr_rerank: Any = None
    stage: Any = None


def drive_like_the_engine(adapter) -> list | None:
    """What the engine does: ``retrieval_backend()`` once, then ``await search(ctx)``."""
    backend = adapter.retrieval_backend()
    if backend is None:
        return None
    ctx = EngineRetrievalContext(query_embedding=[1.0] * 8, query_text="hello", memory=None)
    return asyncio.run(backend.search(ctx))


def _items(session_id: str) -> list[MemoryItem]:
    return [MemoryItem(item_id=f"i{n}", text=f"item {n}", embedding=tuple(
        1.0 if k == n else 0.0 for k in range(8)), tier="short_term") for n in range(3)]


@pytest.mark.postgres
def test_pgvector_hands_the_engine_no_retriever_and_offers_ours_through_the_seam(
        pgvector_adapter_factory):
    adapter = pgvector_adapter_factory()
    adapter.ensure_schema()
    assert drive_like_the_engine(adapter) is None
    assert offers(adapter, Capability.SERVER_RETRIEVAL)
    assert Capability.SERVER_RETRIEVAL in capabilities_of(adapter)
    adapter.sync_items("sess", _items("sess"))
    retriever = server_retriever_of(adapter)
    got = retriever.search(RetrievalContext(session_id="sess", query_embedding=(1.0,) + (0.0,) * 7,
                                            top_k=2))
    assert [u.item_id for u in got][:1] == ["i0"]


def test_mongo_hands_the_engine_no_retriever_even_with_item_sync(make_adapter):
    adapter = make_adapter(item_sync=True)
    assert drive_like_the_engine(adapter) is None
    assert offers(adapter, Capability.SERVER_RETRIEVAL)
    assert server_retriever_of(adapter) is adapter.server_retriever()
    assert server_retriever_of(make_adapter()) is None  # mirror off: nothing server-side


@pytest.mark.parametrize("name", ["memory"])
def test_shipped_in_process_backends_hand_out_nothing(name):
    from backends.memory import MemoryBackendAdapter

    adapter = MemoryBackendAdapter()
    assert drive_like_the_engine(adapter) is None
    assert server_retriever_of(adapter) is None
