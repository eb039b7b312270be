"""An engine SQL deployment, operated by semvecctl as ``postgres`` and then switched to
``pgvector`` (issue 13), on the real PostgreSQL the suite starts.

The database is prepared with the engine's DDL (tests/support/fixtures/engine_sql_ddl.py: the
literal ENGINE-WIRE section 5 shape and the shape the engine's create_all emits, NOT NULL
without server DEFAULTs) and rows in the engine's shape. Every session must stay byte
identical through listing, inspecting, exporting, conformance runs, ``indexes ensure`` as
pgvector and use as pgvector, and back.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime

import psycopg
import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.fixtures.engine_sql_ddl import ENGINE_MODEL_DDL, ENGINE_WIRE_DDL

pytestmark = pytest.mark.postgres

UPDATED = datetime(2026, 3, 1, 12, 0, 0)
BLOBS = {
    "engine-anon": bytes(range(256)) * 3,
    "engine-acme": b"\x00\x01acme state\xff",
    "engine-blank-owner": b"{\"v\": 2}",
}
EVENT_IDS = [str(uuid.uuid4()) for _ in range(4)]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture(params=["wire", "model"])
def engine_url(request, pgvector_url):
    """A database exactly as an engine deployment leaves it (either shape)."""
    ddl = ENGINE_WIRE_DDL if request.param == "wire" else ENGINE_MODEL_DDL
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        for statement in ddl:
            conn.execute(statement)
        rows = [
            ("engine-anon", BLOBS["engine-anon"], 3, True, "__anonymous__", "hello"),
            ("engine-acme", BLOBS["engine-acme"], 1, False, "acme/bot", None),
            ("engine-blank-owner", BLOBS["engine-blank-owner"], 2, False, "", None),
        ]
        for row in rows:
            conn.execute(
                "INSERT INTO semvec_session_state (session_id, state_blob, version, drift_exempt,"
                " owner_subject, pending_message, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (*row, UPDATED))
        events = [
            (EVENT_IDS[0], "alice", "", "engine-anon", datetime(2026, 3, 1, 10), "first",
             "[0.1, 0.2]", '{"k": 1}', None),
            (EVENT_IDS[1], "alice", "", "engine-anon", datetime(2026, 3, 1, 11), "second",
             "[]", "{}", EVENT_IDS[0]),
            (EVENT_IDS[2], "alice", "acme/bot", "engine-acme", datetime(2026, 3, 1, 12),
             "third", "[0.3, 0.4]", "{}", None),
            (EVENT_IDS[3], "bob", "acme/bot", "engine-acme", datetime(2026, 3, 1, 9), "bob's",
             "[1.0]", '{"tags": ["x"]}', None),
        ]
        for event in events:
            conn.execute(
                "INSERT INTO semvec_memory_events (event_id, user_id, owner_subject, session_id,"
                " created_at, content, embedding, meta, source_event_id)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", event)
        conn.execute("INSERT INTO semvec_sessions VALUES ('engine-anon', 'engine data')")
    return pgvector_url


def snapshot(url: str) -> dict:
    """Every engine row, every column, as stored."""
    with psycopg.connect(url) as conn:
        return {
            "state": conn.execute("SELECT * FROM semvec_session_state WHERE session_id"
                                  " LIKE 'engine-%%' ORDER BY session_id").fetchall(),
            "events": conn.execute("SELECT * FROM semvec_memory_events WHERE event_id ="
                                   " ANY(%s) ORDER BY event_id", (EVENT_IDS,)).fetchall(),
            "engine_own": conn.execute("SELECT * FROM semvec_sessions").fetchall(),
        }


def columns(url: str, *fields: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            f"SELECT table_name, column_name, {', '.join(fields)} FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name IN"
            " ('semvec_session_state', 'semvec_memory_events')"
            " ORDER BY table_name, column_name").fetchall()


SHAPE = ("data_type", "character_maximum_length", "datetime_precision")


def indexes(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE tablename IN"
            " ('semvec_session_state', 'semvec_memory_events') ORDER BY indexname").fetchall()


def test_our_tables_have_exactly_the_engines_shape(postgres_server):
    """Types and widths of both engine shapes; nullability of the engine's model; the
    DEFAULTs ENGINE-WIRE lists; the same indexes."""
    from backends.postgres import PostgresAdapter

    urls = {}
    for name, ddl in (("ours", None), ("wire", ENGINE_WIRE_DDL), ("model", ENGINE_MODEL_DDL)):
        urls[name] = postgres_server.url(postgres_server.take_database())
        if ddl is None:
            adapter = PostgresAdapter(urls[name])
            try:
                adapter.ensure_schema()
            finally:
                adapter.close()
        else:
            with psycopg.connect(urls[name], autocommit=True) as conn:
                for statement in ddl:
                    conn.execute(statement)
    assert columns(urls["ours"], *SHAPE) == columns(urls["wire"], *SHAPE) \
        == columns(urls["model"], *SHAPE)
    assert columns(urls["ours"], "is_nullable") == columns(urls["model"], "is_nullable")
    assert columns(urls["ours"], "column_default") == columns(urls["wire"], "column_default")
    assert indexes(urls["ours"]) == indexes(urls["wire"]) == indexes(urls["model"])


def test_an_engine_database_is_operated_as_postgres(engine_url, tmp_path):
    before = snapshot(engine_url)

    resolved = run("backends", "resolve", "--uri", engine_url, "-o", "json")
    assert resolved.exit_code == 0, resolved.output
    data = json.loads(resolved.stdout)
    assert data["resolved"] == "postgres" and "semvec_memory_items" in data["chosen_by"]

    health = run("health", "--uri", engine_url, "-o", "json")
    assert health.exit_code == 0, health.output
    report = json.loads(health.stdout)
    assert report["backend"] == "postgres"
    assert report["details"]["database_layout"] == "postgres"
    assert report["details"]["tables"] == {"semvec_session_state": True,
                                           "semvec_memory_events": True}

    listed = run("sessions", "list", "--uri", engine_url, "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert sorted(r["session_id"] for r in json.loads(listed.stdout)) == sorted(BLOBS)

    inspected = run("sessions", "inspect", "engine-anon", "--uri", engine_url, "-o", "json")
    assert inspected.exit_code == 0, inspected.output
    shown = json.loads(inspected.stdout)
    assert shown["version"] == 3 and shown["owner_subject"] == "__anonymous__"
    assert shown["blob_size"] == len(BLOBS["engine-anon"])

    archive = tmp_path / "engine.jsonl"
    exported = run("sessions", "export", "--uri", engine_url, "--out", str(archive), "--yes")
    assert exported.exit_code == 0, exported.output
    text = archive.read_text()
    assert all(sid in text for sid in BLOBS)

    assert run("indexes", "validate", "--uri", engine_url).exit_code == 0
    assert snapshot(engine_url) == before


def test_switching_to_pgvector_and_back_keeps_every_session_byte_identical(engine_url,
                                                                          monkeypatch):
    from backends.contract import MemoryItem, MemoryEvent, OwnerScope
    from backends.pgvector import PgVectorAdapter
    from backends.postgres import PostgresAdapter

    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", "8")
    before = snapshot(engine_url)
    ensured = run("indexes", "ensure", "--backend", "pgvector", "--uri", engine_url, "--apply", "--yes")
    assert ensured.exit_code == 0, ensured.output
    assert snapshot(engine_url) == before
    assert json.loads(run("backends", "resolve", "--uri", engine_url, "-o", "json").stdout
                      )["resolved"] == "pgvector"

    vec = PgVectorAdapter(engine_url, dimensions=8)
    try:
        store = vec.state_store()
        for sid, blob in BLOBS.items():
            assert store.load(sid)[0] == blob
        assert store.load_full("engine-anon") == (BLOBS["engine-anon"], 3, "__anonymous__",
                                                  "hello")
        assert store.is_drift_exempt("engine-anon") is True
        assert store.load("engine-blank-owner", owner_subject=None)[1] == 2
        alice = vec.event_store().list_events("alice")
        assert [e.content for e in alice] == ["third", "second", "first"]
        assert alice[1].source_event_id == EVENT_IDS[0] and alice[1].embedding == ()
        assert alice[2].embedding == (0.1, 0.2) and alice[2].meta == {"k": 1}
        assert [e.content for e in vec.event_store().list_events(
            "alice", owner_subject=None)] == ["second", "first"]
        assert vec.event_store().get_event(EVENT_IDS[3], owner_subject="acme/bot").meta == {
            "tags": ["x"]}
        # used as pgvector: new sessions, turns, items
        vec.commit_turn("pgv-new", b"new", expected_version=None, scope=OwnerScope("acme"),
                        events=[MemoryEvent(event_id=str(uuid.uuid4()), user_id="carol",
                                            content="hi", owner_subject="acme")])
        vec.sync_items("pgv-new", [MemoryItem("m1", "hello", embedding=(0.1,) * 8)])
        assert snapshot(engine_url) == before
        # and a turn on an engine session, under its owner's scope
        assert vec.commit_turn("engine-acme", b"next", expected_version=1,
                               scope=OwnerScope("acme", "bot")) == 2
    finally:
        vec.close()

    back = PostgresAdapter(engine_url)
    try:
        assert back.state_store().load("engine-acme", scope=OwnerScope("acme", "bot")) == (
            b"next", 2)
        assert back.state_store().load("pgv-new") == (b"new", 1)
        assert back.state_store().load("engine-anon") == (BLOBS["engine-anon"], 3)
        assert [e.content for e in back.event_store().list_by_user("carol")] == ["hi"]
    finally:
        back.close()
    after = snapshot(engine_url)
    assert after["events"] == before["events"] and after["engine_own"] == before["engine_own"]
    assert [r for r in after["state"] if r[0] != "engine-acme"] == [
        r for r in before["state"] if r[0] != "engine-acme"]


@pytest.mark.parametrize("backend", ["postgres", "pgvector"])
def test_conformance_full_on_an_engine_database_leaves_engine_rows_alone(engine_url, backend,
                                                                          monkeypatch):
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", "8")
    if backend == "pgvector":
        assert run("indexes", "ensure", "--backend", "pgvector", "--uri", engine_url,
                   "--apply", "--yes").exit_code == 0
    before = snapshot(engine_url)
    result = run("conformance", "run", "--backend", backend, "--uri", engine_url,
                 "--allow-provisioning", "--dimensions", "8", "-o", "json")
    assert snapshot(engine_url) == before
    report = json.loads(result.stdout)
    problems = [f"{c['group']}.{c['case']}: {c['status']} {c['message']}"
                for g in report["groups"] for c in g["cases"]
                if c["status"] not in ("passed", "not-applicable")]
    assert report["level"] == "FULL" and result.exit_code == 0, problems
