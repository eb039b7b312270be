"""Other tenants' data survives a conformance run and a load run byte-for-byte.

Redis: keys of every type, binary key names, a TTL, and semvec-layout sessions and
events of other users (written through the adapter, so the layout is the real one, plus
look-alikes of the runs' own prefixes); DUMP of every key before and after both runs,
and the keyspace must be exactly what it was (nothing left behind either).
PostgreSQL+pgvector: rows of other tenants in every table; the full contents of every
table compared before and after.
"""

from __future__ import annotations

import uuid

import pytest

from backends.conformance import ConformanceOptions, run_conformance
from backends.contract import MemoryEvent, MemoryItem
from backends.ops.loadtest import LoadPlan, run_load

OPTIONS = ConformanceOptions(writers=4, attempts=6, case_timeout=60)


def seed_through_adapter(adapter, tag: str, *, items: bool) -> None:
    """Sessions, events and (optionally) items of other tenants, in the store's layout."""
    store = adapter.state_store()
    for sid, owner in ((f"{tag}-s1", "tenant-x"), (f"{tag}-s2", None),
                       (f"semvec-load-{tag[:10]}-s0", "tenant-y"),
                       (f"semvec-conf-{tag[:8]}-state-s", "tenant-z")):
        store.save(sid, b"\x00other\xff" + sid.encode(), expected_version=None,
                   owner_subject=owner, pending_message="hold")
        store.save(sid, b"v2" + sid.encode(), expected_version=1, owner_subject=owner)
    adapter.commit_turn(f"{tag}-s3", b"with events", expected_version=None,
                        owner_subject="tenant-x",
                        events=[MemoryEvent(event_id=str(uuid.uuid4()), user_id=f"{tag}-user",
                                            content=f"other {i}", meta={"i": i},
                                            owner_subject="tenant-x",
                                            session_id=f"{tag}-s3") for i in range(3)])
    if items:
        adapter.sync_items(f"{tag}-s1", [MemoryItem(item_id="i1", text="kept",
                                                    embedding=(0.1,) * 8)],
                           owner_subject="tenant-x")


# -- Redis ------------------------------------------------------------------------------


def seed_raw_redis(client, tag: str) -> None:
    client.set(f"{tag}:string", b"\x00bin\xff")
    client.set(f"{tag}:ttl", b"expiring", ex=3600)
    client.hset(f"{tag}:hash", mapping={"a": "1", "b": b"\x01"})
    client.rpush(f"{tag}:list", "x", "y")
    client.sadd(f"{tag}:set", "m1", "m2")
    client.zadd(f"{tag}:zset", {"p": 1.5})
    client.xadd(f"{tag}:stream", {"f": "v"})
    client.pfadd(f"{tag}:hll", "a", "b")
    client.setbit(f"{tag}:bits", 3, 1)
    client.set(b"\xff\xfe" + tag.encode(), b"raw key bytes")
    client.set(f"semvec:state:{tag}-not-a-hash", b"a string where a hash would be")


def snapshot_redis(client, keys=None) -> dict[bytes, tuple[bytes | None, bool]]:
    names = keys if keys is not None else list(client.scan_iter(count=1000))
    return {k: (client.dump(k), client.pttl(k) > 0) for k in names}


@pytest.fixture
def durable_redis(tmp_path):
    """A private redis-server with AOF on: a conformance run certifies a durable server
    only (the suite's shared one runs without AOF)."""
    from tests.support.dedicated_redis import DedicatedRedis

    server = DedicatedRedis(tmp_path / "redis", extra=["--appendonly", "yes"])
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.mark.redis
def test_redis_other_tenants_unchanged_by_conformance_and_load(durable_redis):
    from backends.redis import RedisBackendAdapter

    redis_url = durable_redis.url
    tag = f"tenant-{uuid.uuid4().hex[:12]}"
    with durable_redis.client() as client, RedisBackendAdapter(redis_url) as adapter:
        seed_raw_redis(client, tag)
        seed_through_adapter(adapter, tag, items=False)
        seeded = list(client.scan_iter(count=1000))
        whole = True  # a private server: the whole keyspace is this test's
        before = snapshot_redis(client, None if whole else [k for k in seeded if tag.encode() in k])
        assert len(before) >= 20

        report = run_conformance(lambda: RedisBackendAdapter(redis_url),
                                 selected_name="redis", options=OPTIONS)
        passed = [c for c in report.cases if c.status == "passed"]
        assert len(passed) >= 30, len(passed)
        assert not report.failures, [f"{c.case_id}: {c.message}" for c in report.failures]
        load = run_load(adapter, LoadPlan(writers=3, duration_s=0.8, sessions=2,
                                          events_per_turn=2))
        assert load.verification.ok and load.commits > 0

        after = snapshot_redis(client, None if whole else list(before))
    changed = sorted(k for k in before if after.get(k) != before[k])
    assert changed == [], f"other tenants' keys changed or deleted: {changed[:10]}"
    if whole:
        assert sorted(after) == sorted(before), (
            f"keys left behind: {sorted(set(after) - set(before))[:10]}")


# -- PostgreSQL + pgvector -----------------------------------------------------------------

TABLES = {
    "semvec_session_state": "session_id",
    "semvec_memory_events": "event_id",
    "semvec_memory_items": "session_id, item_id",
}


def snapshot_pg(url: str) -> dict[str, list[tuple]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY {key}").fetchall()
                for table, key in TABLES.items()}


def test_pgvector_other_tenants_unchanged_by_conformance_and_load(pgvector_url):
    from backends.pgvector import PgVectorAdapter

    tag = f"tenant-{uuid.uuid4().hex[:12]}"
    adapter = PgVectorAdapter(pgvector_url, dimensions=8, pool_size=4)
    try:
        seed_through_adapter(adapter, tag, items=True)
        before = snapshot_pg(pgvector_url)
        assert all(before[t] for t in TABLES), {t: len(r) for t, r in before.items()}

        report = run_conformance(lambda: PgVectorAdapter(pgvector_url, dimensions=8),
                                 selected_name="pgvector", options=OPTIONS)
        passed = [c for c in report.cases if c.status == "passed"]
        assert len(passed) >= 35, len(passed)
        assert not report.failures, [f"{c.case_id}: {c.message}" for c in report.failures]
        load = run_load(adapter, LoadPlan(writers=3, duration_s=0.8, sessions=2,
                                          events_per_turn=2))
        assert load.verification.ok and load.commits > 0

        after = snapshot_pg(pgvector_url)
    finally:
        adapter.close()
    for table in TABLES:
        assert after[table] == before[table], (
            f"{table}: {len(before[table])} rows before, {len(after[table])} after; "
            f"new {[r[0] for r in after[table] if r not in before[table]][:5]}, "
            f"gone {[r[0] for r in before[table] if r not in after[table]][:5]}")
