"""Stores for the `events`, `erase` and `sessions prune` tests, on every backend with
the data: the suite's real Redis and PostgreSQL, and MongoDB on mongomock (a fake: no
real MongoDB can run here).

``store_target`` gives, per backend, the CLI arguments that reach the store, an adapter
on the same store, and a raw dump of everything the store holds (keys with their type,
DUMP payload and TTL on Redis; every row of every table on PostgreSQL; every document on
MongoDB), so a test can prove what a command left byte-identical.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest

from backends.contract import MemoryEvent


@dataclass
class Target:
    name: str
    args: list[str]
    adapter: Any
    dump: Callable[[], dict[str, Any]]
    env: dict[str, str]
    #: the SQL databases holding the store (several on a sharded deployment)
    databases: tuple[str, ...] = ()


def _redis_dump(url: str) -> Callable[[], dict[str, Any]]:
    def dump() -> dict[str, Any]:
        import redis

        client = redis.Redis.from_url(url)
        try:
            return {key.decode(): (client.type(key), _redis_value(client, key), client.pttl(key) > 0)
                    for key in client.scan_iter(count=1000)}
        finally:
            client.close()
    return dump


def _redis_value(client: Any, key: bytes) -> Any:
    """Every byte a key holds, in a canonical order: hashes and sorted sets as their sorted
    fields/members (a DUMP payload of a hashtable-encoded hash changes with the dict's
    iteration order, which a mere read may shift by an incremental rehash step)."""
    kind = client.type(key)
    if kind == b"hash":
        return tuple(sorted(client.hgetall(key).items()))
    if kind == b"zset":
        return tuple(sorted(client.zrange(key, 0, -1, withscores=True)))
    return client.dump(key)


def _pg_dump(url: str) -> Callable[[], dict[str, Any]]:
    def dump() -> dict[str, Any]:
        import psycopg

        rows: dict[str, Any] = {}
        with psycopg.connect(url) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()]
            for table in tables:
                for (row,) in conn.execute(f'SELECT row_to_json(t)::text FROM "{table}" t'):
                    rows[f"{table}:{row}"] = row
        return rows
    return dump


def _mongo_dump(client: Any, db: str) -> Callable[[], dict[str, Any]]:
    def dump() -> dict[str, Any]:
        from bson import json_util

        found: dict[str, Any] = {}
        for name in client[db].list_collection_names():
            for doc in client[db][name].find():
                found[f"{name}:{doc['_id']}"] = json_util.dumps(doc, sort_keys=True)
        return found
    return dump


BACKENDS = [pytest.param("redis", marks=pytest.mark.redis),
            pytest.param("postgres", marks=pytest.mark.postgres),
            pytest.param("pgvector", marks=pytest.mark.postgres),
            # the engine's SEMVEC_STATE_DB_SHARDS: a primary and 3 shards, one store
            pytest.param("postgres-sharded", marks=pytest.mark.postgres),
            "mongo"]


def make_target(request: Any, name: str, **options: Any) -> Target:
    """The store ``name`` for this test (fixtures pulled from ``request``)."""
    if name == "redis":
        from backends.redis import RedisBackendAdapter

        url = request.getfixturevalue("redis_url")
        adapter = RedisBackendAdapter(url, **options)
        request.addfinalizer(adapter.close)
        env = ({"SEMVEC_REDIS_SESSION_TTL_S": str(options["ttl_seconds"])}
               if options.get("ttl_seconds") else {})
        return Target(name, ["--uri", url], adapter, _redis_dump(url), env)
    if name == "postgres-sharded":
        from backends.postgres import PostgresAdapter

        deployment = request.getfixturevalue("sharded_sql")
        adapter = PostgresAdapter(deployment.primary, shards=deployment.shard_list, **options)
        adapter.ensure_schema()
        request.addfinalizer(adapter.close)
        dumps = [_pg_dump(url) for url in (deployment.primary, *deployment.shards)]
        # named "postgres" (what the tests branch on): the same backend, on shards
        return Target("postgres", ["--uri", deployment.primary, "--backend", "postgres",
                             "--shards", deployment.shard_list], adapter,
                      lambda: {f"{key} @db{i}": value for i, dump in enumerate(dumps)
                               for key, value in dump().items()}, {},
                      databases=(deployment.primary, *deployment.shards))
    if name in ("postgres", "pgvector"):
        url = request.getfixturevalue("pgvector_url")
        adapter = request.getfixturevalue(f"{name}_adapter_factory")(**options)
        if name == "pgvector":
            adapter.ensure_schema()
        return Target(name, ["--uri", url, "--backend", name], adapter, _pg_dump(url), {},
                      databases=(url,))
    state = request.getfixturevalue("cli_mongo")
    state["options"] = dict(options)
    from tests.support.fixtures.mongo import cli_adapter

    adapter = cli_adapter()
    request.addfinalizer(adapter.close)
    return Target(name, ["--adapter", "tests.support.fixtures.mongo:cli_adapter"], adapter,
                  _mongo_dump(state["client"], state["database"]), {})


@dataclass
class Seeded:
    tag: str
    alice: str
    bob: str
    s1: str
    s2: str
    #: alice's event ids in the order they were appended
    alice_ids: list[str]
    bob_ids: list[str]


def seed(adapter: Any) -> Seeded:
    """Two sessions (s1 owned by acme, s2 unowned); alice has 3 events in s1 (acme) and
    2 in s2 (unowned), bob 2 in s1 (acme). Created times increase with append order."""
    tag = uuid.uuid4().hex[:8]
    s1, s2 = f"{tag}-s1", f"{tag}-s2"
    state = adapter.state_store()
    state.save(s1, b"blob-one", expected_version=None, owner_subject="acme")
    state.save(s2, b"blob-two", expected_version=None)
    events = adapter.event_store()
    base = datetime.now(timezone.utc) - timedelta(hours=1)
    ids: dict[str, list[str]] = {"alice": [], "bob": []}
    plan = [("alice", s1, "acme")] * 3 + [("alice", s2, "")] * 2 + [("bob", s1, "acme")] * 2
    for n, (who, session, owner) in enumerate(plan):
        event = MemoryEvent(event_id=str(uuid.uuid4()), user_id=f"{tag}-{who}",
                            content=f"{who} said {n}", created_at=base + timedelta(seconds=n),
                            embedding=[0.1 * (n + 1)] * 8, owner_subject=owner,
                            session_id=session)
        events.append(event)
        ids[who].append(event.event_id)
    return Seeded(tag, f"{tag}-alice", f"{tag}-bob", s1, s2, ids["alice"], ids["bob"])
