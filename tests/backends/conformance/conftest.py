"""A private redis-server with AOF on, for the runs that want FULL: the suite's shared
per-worker server runs without AOF (fast, and what most tests want), and a Redis without
AOF is not durable, so ``durability.server_is_durable`` fails there by design."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.support.dedicated_redis import DedicatedRedis


@pytest.fixture(scope="session")
def durable_redis(tmp_path_factory) -> Iterator[DedicatedRedis]:
    server = DedicatedRedis(tmp_path_factory.mktemp("durable-redis"),
                            extra=["--appendonly", "yes"])
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def durable_redis_url(durable_redis: DedicatedRedis) -> str:
    return durable_redis.url
