"""Opt-in interop with the deployed engine's own ``postgres`` backend (skipped unless the
proprietary ``semvec`` package and its SQL extras are importable; never a dependency).

The engine creates its tables with its own ``create_all`` and writes sessions and events;
semvecctl reads them as ``postgres`` and as ``pgvector`` (after ``indexes ensure``); then
semvecctl writes and the engine reads state and its whole compliance log back. Run it with
the engine on the path, e.g. ``PYTHONPATH=<dir with semvec, sqlalchemy, psycopg2>``.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from tests.support.fixtures.engine import engine_database_url

pytestmark = [pytest.mark.postgres, pytest.mark.engine]

engine_adapter = pytest.importorskip("semvec.api.postgres_backend_adapter",
                                     reason="the semvec engine (with sqlalchemy) is not installed")


@pytest.fixture
def engine(pgvector_url, monkeypatch):
    from semvec.api import database

    # the driver named explicitly: psycopg 3 unless $SEMVEC_TEST_ENGINE_PG_DRIVER says psycopg2
    monkeypatch.setenv("DATABASE_URL", engine_database_url(pgvector_url))
    database.reset_engine()
    database.create_tables()
    try:
        yield engine_adapter.PostgresBackendAdapter()
    finally:
        database.reset_engine()


def test_engine_and_semvecctl_share_one_sql_store_both_ways(engine, pgvector_url, monkeypatch):
    from semvec.api.owner_scope import OwnerScope as EngineScope
    from semvec.compliance.event_store import MemoryEvent as EngineEvent

    from backends.contract import MemoryEvent, OwnerScope
    from backends.pgvector import PgVectorAdapter
    from backends.postgres import PostgresAdapter

    # the engine writes
    scope = EngineScope("acme", "bot")
    engine.state_store().save("eng-1", b"\x00engine\xff", expected_version=None, scope=scope)
    now = datetime.now(timezone.utc)
    first = EngineEvent(event_id=uuid.uuid4(), user_id="alice", created_at=now - timedelta(1),
                        content="from the engine", embedding=[0.5, 0.25], meta={"k": 1},
                        owner_subject="acme/bot", session_id="eng-1")
    engine.commit_turn("eng-1", b"engine v2", expected_version=1, scope=scope, events=[first])
    engine.state_store().set_drift_exempt("eng-1", True)

    # semvecctl reads it, as postgres and as pgvector
    ours = PostgresAdapter(pgvector_url)
    try:
        assert ours.state_store().load("eng-1", scope=OwnerScope("acme", "bot")) == (
            b"engine v2", 2)
        assert ours.state_store().is_drift_exempt("eng-1") is True
        (seen,) = ours.event_store().list_events("alice")
        assert (seen.event_id, seen.content, seen.embedding, seen.meta) == (
            str(first.event_id), "from the engine", (0.5, 0.25), {"k": 1})
        assert (seen.owner_subject, seen.session_id) == ("acme/bot", "eng-1")
        assert [a.action for a in ours.ensure_indexes(apply=False)] == ["exists"] * 3
        assert all(r.ok for r in ours.validate_indexes())
    finally:
        ours.close()
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", "8")
    vec = PgVectorAdapter(pgvector_url)
    try:
        vec.ensure_indexes()
        assert vec.state_store().load("eng-1") == (b"engine v2", 2)
        # semvecctl writes: an engine session's next turn, a new session, events
        ours_event = MemoryEvent(event_id=str(uuid.uuid4()), user_id="alice",
                                 content="from semvecctl", embedding=(1.0, 0.0),
                                 source_event_id=str(first.event_id), owner_subject="acme/bot",
                                 session_id="eng-1")
        vec.commit_turn("eng-1", b"semvecctl v3", expected_version=2,
                        scope=OwnerScope("acme", "bot"), events=[ours_event])
        vec.state_store().save("ctl-1", b"ours", expected_version=None)
        vec.event_store().append(MemoryEvent(event_id=str(uuid.uuid4()), user_id="bob",
                                             content="no embedding"))
    finally:
        vec.close()

    # the engine reads everything back
    assert engine.state_store().load("eng-1", scope=scope) == (b"semvecctl v3", 3)
    assert engine.state_store().load("ctl-1") == (b"ours", 1)
    assert engine.state_store().is_drift_exempt("eng-1") is True
    events = engine.event_store()
    contents = sorted(e.content for e in events.list_by_user("alice"))
    assert contents == ["from semvecctl", "from the engine"]
    (bob,) = events.list_by_user("bob")
    assert bob.embedding == [] and bob.owner_subject == ""
    assert events.get(uuid.UUID(ours_event.event_id)).source_event_id == first.event_id
    with psycopg.connect(pgvector_url) as conn:
        assert conn.execute("SELECT count(*) FROM semvec_memory_items").fetchone() == (0,)


def test_our_ddl_matches_the_engines_create_all(engine, pgvector_url, postgres_server):
    from backends.postgres import PostgresAdapter

    fresh = postgres_server.url(postgres_server.take_database())
    ours = PostgresAdapter(fresh)
    try:
        ours.ensure_schema()
    finally:
        ours.close()

    def shape(url):
        with psycopg.connect(url) as conn:
            return conn.execute(
                "SELECT table_name, column_name, data_type, character_maximum_length,"
                " is_nullable FROM information_schema.columns WHERE table_schema = 'public'"
                " AND table_name IN ('semvec_session_state', 'semvec_memory_events')"
                " ORDER BY table_name, column_name").fetchall(), conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN"
                " ('semvec_session_state', 'semvec_memory_events') ORDER BY 1").fetchall()

    assert shape(fresh) == shape(pgvector_url)


def test_the_engine_resolves_our_pgvector_plugin_and_runs_a_turn(engine, pgvector_url,
                                                                 monkeypatch):
    """The engine's own resolver (not our imitation of it) loads pgvector from our entry
    point, with DATABASE_URL as its only configuration."""
    from semvec.api import backend_adapter
    from semvec.api.owner_scope import OwnerScope as EngineScope
    from semvec.compliance.event_store import MemoryEvent as EngineEvent

    monkeypatch.delenv("SEMVEC_PGVECTOR_URL", raising=False)
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", "8")
    backend_adapter.invalidate_discovery_cache()
    assert "pgvector" in backend_adapter.installed_backend_names()
    assert backend_adapter.installed_backend_is_persistent("pgvector") is True
    plugin = backend_adapter.resolve_adapter("pgvector")
    try:
        assert type(plugin).__module__.startswith("backends.pgvector")
        scope = EngineScope("acme")
        event = EngineEvent(event_id=uuid.uuid4(), user_id="carol",
                            created_at=datetime.now(timezone.utc), content="via plugin",
                            embedding=[0.1], meta={}, owner_subject="acme")
        assert plugin.commit_turn("plug-1", b"p", expected_version=None, scope=scope,
                                  events=[event]) == 1
        assert plugin.state_store().load("plug-1", scope=scope) == (b"p", 1)
        assert plugin.event_store().get(event.event_id).content == "via plugin"
    finally:
        plugin.close()
    # and the engine's own postgres backend sees what the plugin wrote
    assert engine.state_store().load("plug-1", scope=scope) == (b"p", 1)
    assert [e.content for e in engine.event_store().list_by_user("carol")] == ["via plugin"]


def test_the_engine_reads_and_continues_sessions_a_live_migration_batch_restored(engine,
                                                                                  pgvector_url):
    """``restore_sessions`` (the bulk pass of ``semvecctl migrate``) writes the engine's own
    rows: COPY straight into the table, and the fallback when an id already exists. The
    engine loads each at its version, with its owner, and commits the next turn."""
    from semvec.api.owner_scope import OwnerScope as EngineScope

    from backends.contract import RestoreRow
    from backends.postgres import PostgresAdapter

    tag = uuid.uuid4().hex[:8]
    first = [RestoreRow(f"mig-{tag}-a", b"\x00blob a\xff", 4, owner_subject="acme/bot"),
             RestoreRow(f"mig-{tag}-b", b"blob b", 1, pending_message="hi",
                        updated_at=datetime.now(timezone.utc) - timedelta(hours=1))]
    ours = PostgresAdapter(pgvector_url)
    try:
        store = ours.state_store()
        assert store.restore_sessions(first) == set()  # the straight COPY
        again = [RestoreRow(f"mig-{tag}-a", b"other", 9, owner_subject="acme/bot"),
                 RestoreRow(f"mig-{tag}-c", b"blob c", 2)]
        assert store.restore_sessions(again) == {f"mig-{tag}-a"}  # the fallback keeps a
    finally:
        ours.close()
    states = engine.state_store()
    assert states.load(f"mig-{tag}-a", scope=EngineScope("acme", "bot")) == (b"\x00blob a\xff", 4)
    assert states.load(f"mig-{tag}-b") == (b"blob b", 1)
    assert states.load(f"mig-{tag}-c") == (b"blob c", 2)
    assert engine.commit_turn(f"mig-{tag}-a", b"engine next", expected_version=4,
                              scope=EngineScope("acme", "bot"), events=[]) == 5
