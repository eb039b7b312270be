"""`semvecctl doctor` on the real PostgreSQL the suite starts, over the engine's SQL
layout (nullable, as ENGINE-WIRE section 5 declares it, so damage can be planted), as
``pgvector`` (with its item mirror) and as ``postgres``."""

from __future__ import annotations

import json
import uuid
from datetime import datetime

import psycopg
import pytest
from typer.testing import CliRunner

from backends.contract import MemoryEvent, MemoryItem
from semvecctl.app import app
from tests.support.fixtures.engine_sql_ddl import ENGINE_WIRE_DDL

pytestmark = pytest.mark.postgres

runner = CliRunner()


def doctor(url: str, backend: str, *extra: str):
    """The findings, less the durability advice: the suite's server runs with fsync off
    on purpose (speed), which doctor rightly reports; test_durability_advice checks it."""
    result = runner.invoke(app, ["doctor", "--uri", url, "--backend", backend, "-o", "json", *extra])
    assert result.stdout.strip(), result.output
    findings = json.loads(result.stdout)["findings"]
    return result.exit_code, [f for f in findings if f["check"] != "advice.durability"]


def test_durability_advice_is_kept_apart(store):
    result = runner.invoke(app, ["doctor", "--uri", store, "-b", "postgres", "-o", "jsonl"])
    advice = [json.loads(line) for line in result.stdout.splitlines()]
    with psycopg.connect(store) as conn:
        fsync = conn.execute("SHOW fsync").fetchone()[0]
    if fsync == "on":
        assert advice == []
    else:
        assert [(f["check"], f["section"], f["severity"]) for f in advice] == [
            ("advice.durability", "semvecctl recommendations", "warning")]
        assert "fsync=off" in advice[0]["what"]
    assert result.exit_code == 0  # advice never fails the audit


@pytest.fixture
def store(pgvector_url, pgvector_adapter_factory):
    """An engine database with one sound session, one user's events and a mirrored
    session; every index semvecctl recommends is in place."""
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        for statement in ENGINE_WIRE_DDL:
            conn.execute(statement)
    adapter = pgvector_adapter_factory()
    adapter.ensure_indexes()
    adapter.state_store().save("s-ok", b"blob", expected_version=None, owner_subject="acme")
    events = adapter.event_store()
    for i in range(3):
        events.append(MemoryEvent(event_id=str(uuid.uuid4()), user_id="alice",
                                  content=f"e{i}", embedding=[0.1] * 8, session_id="s-ok"))
    adapter.sync_items("s-ok", [MemoryItem("i1", "hello", embedding=(0.1,) * 8)],
                       owner_subject="acme")
    return pgvector_url


@pytest.mark.parametrize("backend", ["pgvector", "postgres"])
def test_clean_store_gives_no_finding(store, backend):
    code, findings = doctor(store, backend)
    assert findings == []
    assert code == 0


def plant(url: str) -> dict[str, str]:
    bad_emb, null_emb = str(uuid.uuid4()), str(uuid.uuid4())
    now = datetime(2026, 3, 1, 12)
    with psycopg.connect(url, autocommit=True) as conn:
        state = ("INSERT INTO semvec_session_state (session_id, state_blob, version, "
                 "drift_exempt, owner_subject, pending_message, updated_at) "
                 "VALUES (%s, %s, %s, false, NULL, NULL, %s)")
        conn.execute(state, ("s-noblob", None, 1, now))
        conn.execute(state, ("s-noversion", b"x", None, now))
        conn.execute(state, ("s-zero", b"x", 0, now))
        conn.execute(state, ("s-notime", b"x", 1, None))
        ev = ("INSERT INTO semvec_memory_events (event_id, user_id, owner_subject, session_id,"
              " created_at, content, embedding, meta, source_event_id)"
              " VALUES (%s, %s, '', '', %s, 'c', %s, '{}', %s)")
        conn.execute(ev, ("not-a-uuid", "bob", now, "[]", None))
        conn.execute(ev, (null_emb, "bob", now, None, None))
        conn.execute(ev, (bad_emb, "bob", now, '{"x": 1}', "nope"))
        conn.execute("INSERT INTO semvec_memory_items (session_id, item_id, text)"
                     " VALUES ('s-gone', 'i1', 't'), ('s-gone', 'i2', 't')")
        conn.execute("CREATE TABLE semvec_mystery (id int)")
    return {"bad_emb": bad_emb, "null_emb": null_emb}


def test_finds_exactly_the_planted_problems_and_apply_purges_only_orphaned_items(store, monkeypatch):
    ids = plant(store)
    monkeypatch.setenv("SEMVEC_SQL_SESSION_TTL_S", "3600")
    code, findings = doctor(store, "pgvector")
    got = {(f["check"], f["where"]) for f in findings}
    state, events, items = ("row \"public\".\"semvec_session_state\"",
                            "row \"public\".\"semvec_memory_events\"",
                            "rows \"public\".\"semvec_memory_items\"")
    assert got == {
        ("state.unreadable", f"{state} 's-noblob'"),
        ("state.unreadable", f"{state} 's-noversion'"),
        ("state.unreadable", f"{state} 's-zero'"),
        ("state.no-ttl", f"{state} 's-notime'"),
        ("event.unreadable", f"{events} 'not-a-uuid' (user 'bob')"),
        ("event.unreadable", f"{events} '{ids['null_emb']}' (user 'bob')"),
        ("event.unreadable", f"{events} '{ids['bad_emb']}' (user 'bob')"),
        ("items.orphaned", f"{items} session 's-gone'"),
        ("namespace.unknown-table", "table public.semvec_mystery"),
    }
    assert code == 1
    what = {f["where"]: f["what"] for f in findings}
    assert "embedding is null" in what[f"{events} '{ids['null_emb']}' (user 'bob')"]
    assert "embedding is not a JSON array" in what[f"{events} '{ids['bad_emb']}' (user 'bob')"]
    assert "source_event_id is not a UUID" in what[f"{events} '{ids['bad_emb']}' (user 'bob')"]
    assert "2 item-mirror row(s)" in what[f"{items} session 's-gone'"]

    # the one safe repair on SQL (#23): item rows of a session that is gone are purged,
    # re-checked and gone on the next audit; everything else is left for a human
    code, applied = doctor(store, "pgvector", "--fix", "--apply", "--yes")
    outcomes = {(f["check"], f["where"]): f["outcome"] for f in applied}
    assert outcomes.pop(("items.orphaned", f"{items} session 's-gone'")) == "repaired"
    assert set(outcomes.values()) == {"left (needs a human)"}
    assert code == 1
    _, again = doctor(store, "pgvector")
    assert {(f["check"], f["where"]) for f in again} == got - {
        ("items.orphaned", f"{items} session 's-gone'")}
    with psycopg.connect(store) as conn:
        assert conn.execute("SELECT count(*) FROM semvec_memory_items WHERE session_id = 's-gone'"
                            ).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM semvec_memory_items WHERE session_id = 's-ok'"
                            ).fetchone()[0] == 1


def test_missing_engine_index_is_an_engine_requirement(store):
    with psycopg.connect(store, autocommit=True) as conn:
        conn.execute("DROP INDEX ix_semvec_memory_events_user_id")
    code, findings = doctor(store, "postgres")
    assert [(f["check"], f["section"], f["severity"]) for f in findings] == [
        ("index.missing", "engine requirements", "error")]
    assert code == 1


def _event(conn, user: str, embedding: str, meta: str) -> str:
    eid = str(uuid.uuid4())
    conn.execute("INSERT INTO semvec_memory_events (event_id, user_id, owner_subject, session_id,"
                 " created_at, content, embedding, meta, source_event_id)"
                 " VALUES (%s, %s, '', '', %s, 'c', %s, %s, NULL)",
                 (eid, user, datetime(2026, 3, 1, 12), embedding, meta))
    return eid


def test_strict_audit_parses_meta_and_embedding(store):
    """#23 finding 8: ``'{bad'`` passed (only its first character was checked) and
    ``[NaN]`` was not flagged; both are found now, with the field named. Sound values of
    every shape the engine writes (exponents, negatives, nested meta) stay clean."""
    with psycopg.connect(store, autocommit=True) as conn:
        bad_meta = _event(conn, "carol", "[0.1]", "{bad")
        nan = _event(conn, "carol", "[NaN]", "{}")
        big = _event(conn, "carol", "[1e999]", "{}")
        text = _event(conn, "carol", '[0.1, "x"]', "{}")
        listed = _event(conn, "carol", "[0.1]", "[1, 2]")
        _event(conn, "carol", "[-1.5e-07, 2.0, 0, 3e+20]", '{"a": {"b": [1, null]}, "c": "}"}')
        _event(conn, "carol", "[]", "")
    for backend in ("pgvector", "postgres"):
        code, findings = doctor(store, backend)
        what = {f["where"].split("'")[1]: f["what"] for f in findings
                if f["check"] == "event.unreadable"}
        assert set(what) == {bad_meta, nan, big, text, listed}
        assert "meta is not valid JSON" in what[bad_meta]
        assert "embedding holds a non-finite number" in what[nan]
        assert "embedding holds a non-finite number" in what[big]
        assert "embedding holds a non-number" in what[text]
        assert "meta is not a JSON object" in what[listed]
        assert code == 1


def test_engine_tables_are_not_unknown(store):
    """#24: every table the engine's create_tables() makes (ENGINE-WIRE 6b) is its own."""
    from backends.postgres.audit import ENGINE_TABLES

    with psycopg.connect(store, autocommit=True) as conn:
        for table in sorted(ENGINE_TABLES):
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (id int)")
    assert len(ENGINE_TABLES) == 10
    for backend in ("pgvector", "postgres"):
        code, findings = doctor(store, backend)
        assert findings == []
        assert code == 0


def test_leftover_run_rows_are_flagged(store, pgvector_adapter_factory):
    adapter = pgvector_adapter_factory()
    adapter.state_store().save("semvec-load-00ff00ff00-s1", b"x", expected_version=None)
    adapter.event_store().append(MemoryEvent(event_id=str(uuid.uuid4()),
                                             user_id="semvec-conf-0badcafe-u", content="c"))
    code, findings = doctor(store, "pgvector")
    left = {f["where"]: f["repair"] for f in findings if f["check"] == "leftover.run-data"}
    assert set(left) == {"rows prefix semvec-load-00ff00ff00-", "rows prefix semvec-conf-0badcafe-"}
    assert "load cleanup --prefix semvec-load-00ff00ff00- --sessions 2" in \
        left["rows prefix semvec-load-00ff00ff00-"]
    assert code == 0
