"""A sharded SQL deployment (the engine's ``SEMVEC_STATE_DB_SHARDS``) is one store: every
single-session call lands on the session's shard as the engine routes it, every listing,
count and event read covers every database, and nothing answers for a part as if it were
the whole. On the suite's real PostgreSQL, one database per shard."""

from __future__ import annotations

import hashlib
import random
import string
import uuid
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from backends.contract import MemoryEvent
from backends.errors import BackendUnreachable
from backends.postgres.placement import shard_index

pytestmark = pytest.mark.postgres


def engine_route(session_id: str, count: int) -> int:
    """ENGINE-WIRE section 10, written out independently of ours: the index whose
    blake2b digest of ``"{i}:{session_id}"`` is largest, compared as bytes."""
    return max(range(count), key=lambda i: hashlib.blake2b(f"{i}:{session_id}".encode()).digest())


def _ids(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "-_:/é"
    return [uuid.uuid4().hex if i % 2 else "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
            for i in range(n)]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_routing_equals_the_engines_for_ten_thousand_ids(count):
    ids = _ids(10_000)
    assert [shard_index(sid, count) for sid in ids] == [engine_route(sid, count) for sid in ids]


@pytest.mark.engine
def test_routing_equals_the_engine_module_itself_when_installed():
    database = pytest.importorskip("semvec.api.database", reason="the semvec engine is opt-in")
    ids = _ids(10_000, seed=11)
    for count in (2, 3, 4):
        assert [shard_index(sid, count) for sid in ids] == [database._hrw_index(sid, count) for sid in ids]


def _rows(url: str, table: str = "semvec_session_state", column: str = "session_id") -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0]
        if exists is None:
            return set()
        return {r[0] for r in conn.execute(f"SELECT {column} FROM {table}").fetchall()}


def _event(user: str, session: str, n: int, owner: str = "acme") -> MemoryEvent:
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, session_id=session,
                       owner_subject=owner, content=f"turn {n}", embedding=[1.0, 0.0],
                       created_at=datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=n))


@pytest.fixture(params=["postgres", "pgvector"])
def sharded_adapter(request, sharded_sql):
    from backends.registry import Registry

    adapter = Registry().load_adapter(request.param, uri=sharded_sql.primary,
                                      shards=sharded_sql.shard_list, **(
                                          {"dimensions": 2} if request.param == "pgvector" else {}))
    try:
        yield adapter, sharded_sql
    finally:
        adapter.close()


def test_each_session_lands_on_its_engine_shard_and_reads_cover_every_shard(sharded_adapter):
    adapter, deployment = sharded_adapter
    store = adapter.state_store()
    ids = [f"s-{n:03d}" for n in range(60)]
    for n, sid in enumerate(ids):
        store.save(sid, b"blob-%d" % n, expected_version=None, owner_subject="acme")
    for i, url in enumerate(deployment.shards):
        assert _rows(url) == {sid for sid in ids if engine_route(sid, 3) == i}
    assert _rows(deployment.primary) == set()
    assert all(rows for rows in (_rows(url) for url in deployment.shards))  # every shard used
    assert [s.session_id for s in store.iter_sessions(batch_size=7)] == sorted(ids)
    assert store.count_sessions() == 60
    assert store.count_sessions(match="s-01*") == 10
    assert store.count_sessions(match="s-0?5") == 6
    assert sorted(adapter.iter_session_ids()) == sorted(ids)
    assert sorted(adapter.iter_session_ids(owner_subject="acme", match="s-0?5")) == [
        f"s-0{n}5" for n in range(6)]
    assert list(adapter.iter_session_ids(owner_subject=None)) == []
    pairs = list(adapter.iter_session_states(match="s-0?5", batch_size=2))
    assert [summary for summary, _ in pairs] == list(store.iter_sessions(match="s-0?5"))
    assert [(row.blob, row.version, row.owner_subject) for _, row in pairs] == [
        (b"blob-%d" % n, 1, "acme") for n in range(5, 60, 10)]
    assert [d and d.blob_sha256 for d in store.load_digests_many(["s-001", "nope", "s-042"])] == [
        hashlib.sha256(b"blob-1").hexdigest(), None, hashlib.sha256(b"blob-42").hexdigest()]
    assert store.load("s-042") == (b"blob-42", 1)
    assert store.save("s-042", b"next", expected_version=1, owner_subject="acme") == 2
    assert [row.version if row else None for row in store.load_full_many(["s-001", "nope", "s-042"])] == [1, None, 2]
    assert store.delete("s-042") is True and store.load("s-042") is None


def test_turn_events_go_to_the_sessions_shard_and_out_of_turn_events_to_the_primary(sharded_adapter):
    adapter, deployment = sharded_adapter
    events = adapter.event_store()
    sessions = [f"t-{n}" for n in range(12)]
    for n, sid in enumerate(sessions):
        adapter.commit_turn(sid, b"x", expected_version=None, owner_subject="acme",
                            events=[_event("alice", sid, n)])
    loose = _event("alice", "", 100)
    events.append(loose)
    for i, url in enumerate(deployment.shards):
        on_shard = _rows(url, "semvec_memory_events", "session_id")
        assert on_shard == {sid for sid in sessions if engine_route(sid, 3) == i}
    assert _rows(deployment.primary, "semvec_memory_events", "event_id") == {loose.event_id}
    listed = events.list_events("alice")
    assert len(listed) == 13 == events.count_for_user("alice")
    assert [e.content for e in listed] == ["turn 100"] + [f"turn {n}" for n in reversed(range(12))]
    assert [e.event_id for e in events.iter_events("alice", page=2)] == [e.event_id for e in listed]
    assert [e.content for e in events.list_events("alice", limit=3)] == ["turn 100", "turn 11", "turn 10"]
    assert events.get_event(listed[5].event_id).content == listed[5].content
    assert events.session_subjects("t-3") == ["alice"]
    shapes = list(events.iter_log_shapes())
    assert [(s.user_id, s.events) for s in shapes] == [("alice", 13)]
    assert events.purge_user("alice") == 13 and events.list_events("alice") == []


def test_the_engines_variables_alone_describe_the_deployment(sharded_sql, monkeypatch):
    """``DATABASE_URL`` and ``SEMVEC_STATE_DB_SHARDS`` with no argument (how the engine
    configures a plugin), and the engine's driver spellings in both."""
    from backends.postgres import PostgresAdapter

    spelled = [url.replace("postgresql://", f"postgresql+{driver}://")
               for url, driver in zip(sharded_sql.shards, ("psycopg", "psycopg2", "asyncpg"))]
    monkeypatch.setenv("DATABASE_URL", sharded_sql.primary.replace("postgresql://", "postgresql+psycopg://"))
    monkeypatch.setenv("SEMVEC_STATE_DB_SHARDS", " , ".join(spelled) + ", ")
    adapter = PostgresAdapter()
    try:
        assert len(adapter.placement.shards) == 3
        adapter.state_store().save("engine-1", b"a", expected_version=None)
        assert _rows(sharded_sql.shards[engine_route("engine-1", 3)]) == {"engine-1"}
    finally:
        adapter.close()
    other = PostgresAdapter(sharded_sql.shards[0])  # another database: the engine's list is not its
    try:
        assert not other.placement.sharded
    finally:
        other.close()


def test_a_misplaced_copy_is_not_listed_and_one_shard_down_fails_the_probe(sharded_adapter):
    adapter, deployment = sharded_adapter
    adapter.ensure_schema()  # every database holds the tables, as the engine creates them
    store = adapter.state_store()
    store.save("placed", b"a", expected_version=None)
    wrong = deployment.shards[(engine_route("placed", 3) + 1) % 3]
    with psycopg.connect(wrong, autocommit=True) as conn:
        conn.execute("INSERT INTO semvec_session_state (session_id, state_blob, version, drift_exempt,"
                     " owner_subject, pending_message, updated_at) VALUES ('placed', 'old', 1, false,"
                     " NULL, NULL, now())")
    assert [s.session_id for s in store.iter_sessions()] == ["placed"]
    assert list(adapter.iter_session_ids()) == ["placed"]
    assert [(summary.session_id, row.blob) for summary, row in adapter.iter_session_states()] == [
        ("placed", b"a")]
    assert store.count_sessions() == 1 and store.count_sessions(match="pl?ced") == 1
    assert adapter.check_health(timeout=5) is True
    details = adapter.health_details(5)
    assert details["reachable"] and [d["database"] for d in details["databases"]] == [
        "primary", "shard 0", "shard 1", "shard 2"]


def test_one_shard_unreachable_is_named_never_a_smaller_green_answer(sharded_sql):
    from backends.postgres import PostgresAdapter

    dead = "postgresql://postgres@127.0.0.1:1/nowhere"
    adapter = PostgresAdapter(sharded_sql.primary, shards=[*sharded_sql.shards[:2], dead],
                              connect_timeout=2)
    try:
        assert adapter.check_health(timeout=2) is False
        details = adapter.health_details(2)
        assert details["reachable"] is False
        assert "shard 2" in details["error"] and "127.0.0.1:1" in details["error"]
        victim = next(f"v{n}" for n in range(100) if engine_route(f"v{n}", 3) == 2)
        with pytest.raises(BackendUnreachable, match="127.0.0.1:1"):
            list(adapter.state_store().iter_sessions())
        with pytest.raises(BackendUnreachable, match="127.0.0.1:1"):
            adapter.state_store().count_sessions()
        with pytest.raises(BackendUnreachable, match="127.0.0.1:1"):
            adapter.state_store().load(victim)
    finally:
        adapter.close()


def test_a_limit_counts_only_the_events_the_routing_reads(sharded_adapter):
    """Old copies a reshard leaves on a shard (doctor removes them) are not read twice,
    and never make a limited listing come up short."""
    adapter, deployment = sharded_adapter
    adapter.ensure_schema()
    sessions = [f"lim-{n}" for n in range(6)]
    for n, sid in enumerate(sessions):
        adapter.commit_turn(sid, b"x", expected_version=None, events=[_event("carol", sid, n)])
    newest = sessions[-1]
    wrong = deployment.shards[(engine_route(newest, 3) + 1) % 3]
    with psycopg.connect(deployment.shards[engine_route(newest, 3)]) as src, psycopg.connect(wrong) as dst:
        row = src.execute("SELECT * FROM semvec_memory_events WHERE session_id = %s", (newest,)).fetchone()
        dst.execute("INSERT INTO semvec_memory_events VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", row)
    events = adapter.event_store()
    assert [e.content for e in events.list_events("carol", limit=3)] == ["turn 5", "turn 4", "turn 3"]
    assert len(events.list_events("carol")) == 6 == events.count_for_user("carol")
