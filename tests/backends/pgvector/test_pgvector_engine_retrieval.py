"""Opt-in (marker ``engine``): the deployed engine with our ``pgvector`` plugin
(``SEMVEC_SESSION_BACKEND=pgvector``, configured from ``DATABASE_URL`` only) runs turns
whose retrieval works: ``retrieval_backend()`` hands the engine nothing it cannot drive,
so every turn has ``retrieval_error`` false and the earlier turns' memories in its
context. Skipped unless the proprietary ``semvec`` engine is importable. Real PostgreSQL
with pgvector from the suite's fixture; a deterministic word-hash embedder stands in for
a model."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from tests.support.fixtures.engine import engine_database_url

pytestmark = [pytest.mark.engine, pytest.mark.postgres]

DIMS = 16


class HashEmbedder:
    """Bag of words hashed onto 16 axes: the same words, the same direction."""

    def get_dimension(self) -> int:
        return DIMS

    def get_embedding(self, text: str):
        import numpy as np

        vector = np.zeros(DIMS)
        for word in text.lower().split():
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMS] += 1.0
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector


def test_the_engine_retrieves_in_process_with_our_pgvector_plugin(pgvector_url, monkeypatch):
    pytest.importorskip("semvec", reason="the semvec engine is not importable (opt-in)")
    monkeypatch.setenv("DATABASE_URL", engine_database_url(pgvector_url))
    monkeypatch.setenv("SEMVEC_SESSION_BACKEND", "pgvector")
    monkeypatch.setenv("SEMVEC_STATE_PERSIST", "1")
    for name in ("SEMVEC_PGVECTOR_URL", "SEMVEC_PGVECTOR_SCHEMA"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", str(DIMS))
    from semvec.api.session_manager import SessionManager
    from semvec.retrieval_backend import InProcessRetrievalBackend

    manager = SessionManager()
    manager.inject_embedder(HashEmbedder())
    assert manager.session_backend() == "pgvector"
    adapter = manager._resolved_adapter()
    assert type(adapter).__module__ == "backends.pgvector.adapter"  # ours was loaded
    assert adapter.retrieval_backend() is None
    session_id = manager.create_session(dimension=DIMS)
    session = manager.get_session(session_id)
    assert isinstance(session._retrieval_backend, InProcessRetrievalBackend)

    turns = ["the acme invoice is overdue", "budget meeting moved to thursday",
             "refund the acme invoice please", "what about the acme invoice"]

    async def run_all():
        return [await session.run(text, response=f"noted {text}") for text in turns]

    results = asyncio.run(run_all())
    assert [r.retrieval_error for r in results] == [False] * len(turns)
    last = results[-1].context
    assert "acme invoice" in last and "0 memories" not in last, last
