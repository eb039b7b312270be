"""One way to build each backend's adapter for cross-backend tests: real Redis and
PostgreSQL from the suite's fixtures, memory, and MongoDB through ``mongomock`` (a fake,
in-process: no real MongoDB can run here)."""

from __future__ import annotations

from typing import Any

import pytest


def make_adapter(request: Any, kind: str, *, mongo_database: str) -> Any:
    """An adapter of ``kind`` (memory, redis, postgres, pgvector or mongomock)."""
    if kind == "memory":
        from backends.memory import MemoryBackendAdapter

        return MemoryBackendAdapter()
    if kind == "redis":
        from backends.redis import RedisBackendAdapter

        return RedisBackendAdapter(request.getfixturevalue("redis_url"))
    if kind == "postgres":
        from backends.postgres import PostgresAdapter

        return PostgresAdapter(request.getfixturevalue("pgvector_url"))
    if kind == "pgvector":
        return request.getfixturevalue("pgvector_adapter_factory")()
    mongomock = pytest.importorskip("mongomock")
    from backends.mongo import MongoBackendAdapter

    return MongoBackendAdapter(client=mongomock.MongoClient(), database=mongo_database)
