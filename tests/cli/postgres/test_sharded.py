"""The commands on a sharded SQL deployment (the engine's ``DATABASE_URL`` plus
``SEMVEC_STATE_DB_SHARDS``), on the suite's real PostgreSQL with one database per shard:
every command answers for the whole deployment, and one shard down is a failure that
names it, never a smaller green answer."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from typer.testing import CliRunner

from backends.contract import MemoryEvent
from backends.postgres.placement import shard_index
from semvecctl.app import app
from tests.support.maintenance import _pg_dump

pytestmark = pytest.mark.postgres


def cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def _event(user: str, session: str, n: int, owner: str) -> MemoryEvent:
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, session_id=session,
                       owner_subject=owner, content=f"{user} {n}", embedding=[0.5, 0.5],
                       created_at=datetime(2026, 3, 1, tzinfo=timezone.utc) + timedelta(seconds=n))


@pytest.fixture
def deployment(sharded_sql):
    """30 sessions with 2 turns each, as the engine writes them: alice of tenant-a owns
    sessions 0-3, bob of tenant-a the rest; each turn's event on the session's shard."""
    from backends.postgres import PostgresAdapter

    adapter = PostgresAdapter(sharded_sql.primary, shards=sharded_sql.shard_list)
    adapter.ensure_schema()
    sessions = [f"sess-{n:02d}" for n in range(30)]
    for n, sid in enumerate(sessions):
        user = "alice" if n < 4 else "bob"
        version = adapter.commit_turn(sid, b"turn-1", expected_version=None, owner_subject="tenant-a",
                                      events=[_event(user, sid, 2 * n, "tenant-a")])
        adapter.commit_turn(sid, b"turn-2", expected_version=version, owner_subject="tenant-a",
                            events=[_event(user, sid, 2 * n + 1, "tenant-a")])
    adapter.close()
    sharded_sql.sessions = sessions  # type: ignore[attr-defined]
    return sharded_sql


def _dump(dep) -> dict[str, str]:
    return {f"{key} @{i}": value for i, url in enumerate((dep.primary, *dep.shards))
            for key, value in _pg_dump(url)().items()}


def test_the_engines_variables_alone_show_every_session(deployment):
    env = {**deployment.environ, "SEMVEC_SESSION_BACKEND": "postgres"}
    counted = cli("sessions", "count", "-o", "json", env=env)
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["sessions"] == 30
    listed = cli("sessions", "list", "-o", "json", env=env)
    assert listed.exit_code == 0, listed.output
    assert sorted(row["session_id"] for row in json.loads(listed.stdout)) == deployment.sessions
    events = cli("events", "list", "--user", "bob", "-o", "json", env=env)
    assert events.exit_code == 0, events.output
    assert len(json.loads(events.stdout)) == 52
    assert "engine's own event readers open the primary only" in events.stderr
    assert "they see 0" in events.stderr
    doctor = cli("doctor", env=env)
    assert doctor.exit_code == 0, doctor.output
    health = cli("health", "-o", "json", env=env)
    assert health.exit_code == 0, health.output
    report = json.loads(health.stdout)
    assert [d["database"] for d in report["details"]["databases"]] == [
        "primary", "shard 0", "shard 1", "shard 2"]
    table = cli("health", env=env)
    assert table.exit_code == 0 and "database shard 2" in table.stdout


def test_the_sqlalchemy_spellings_of_the_engine_are_taken(deployment):
    spelled = {"DATABASE_URL": deployment.primary.replace("postgresql://", "postgresql+psycopg://"),
               "SEMVEC_STATE_DB_SHARDS": ",".join(
                   u.replace("postgresql://", "postgresql+psycopg2://") for u in deployment.shards)}
    counted = cli("sessions", "count", "--backend", "postgres", "-o", "json", env=spelled)
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["sessions"] == 30
    by_flag = cli("sessions", "count", "--uri", spelled["DATABASE_URL"], "--backend", "postgres",
                  "--shards", spelled["SEMVEC_STATE_DB_SHARDS"], "-o", "json")
    assert by_flag.exit_code == 0, by_flag.output
    assert json.loads(by_flag.stdout)["sessions"] == 30


def test_one_shard_down_is_a_failure_that_names_it(deployment):
    dead = "postgresql://postgres:hunter2@127.0.0.1:1/gone"
    shards = ",".join([*deployment.shards[:2], dead])
    health = cli("health", "--uri", deployment.primary, "--backend", "postgres", "--shards", shards,
                 "--timeout", "3")
    assert health.exit_code == 4, health.output
    assert "shard 2" in health.output and "127.0.0.1:1" in health.output
    assert "hunter2" not in health.output
    counted = cli("sessions", "count", "--uri", deployment.primary, "--backend", "postgres",
                  "--shards", shards)
    assert counted.exit_code == 4, counted.output
    assert "hunter2" not in counted.output


def test_erase_removes_the_subject_from_every_database_and_nothing_else(deployment, tmp_path):
    env = {**deployment.environ, "SEMVEC_SESSION_BACKEND": "postgres"}
    before = _dump(deployment)
    receipt = tmp_path / "r.json"
    done = cli("erase", "--user", "alice", "--owner", "tenant-a", "--apply", "--yes",
               "--receipt", str(receipt), env=env)
    assert done.exit_code == 0, done.output
    body = json.loads(receipt.read_text())
    assert body["states_deleted"] == 4 and body["events_deleted"] == 8
    assert body["verification"]["ok"] is True
    alice = deployment.sessions[:4]
    expected_places: dict[str, dict[str, int]] = {}
    for sid in alice:
        where = expected_places.setdefault(f"shard {shard_index(sid, 3)}",
                                           {"events_deleted": 0, "states_deleted": 0})
        where["events_deleted"] += 2
        where["states_deleted"] += 1
    assert body["databases"] == dict(sorted(expected_places.items()))
    after = _dump(deployment)
    # the erasure ledger is the one addition, on the primary only (@0), and names no id
    ledger = {k: v for k, v in after.items() if k.startswith("semvecctl_erasure_")}
    assert ledger and all(k.endswith(" @0") for k in ledger)
    assert not any("alice" in k or "tenant-a" in k for k in ledger)
    after = {k: v for k, v in after.items() if k not in ledger}
    gone = {k for k in before if '"alice"' in k or any(f'"session_id":"{sid}"' in k for sid in alice)}
    assert gone and after == {k: v for k, v in before.items() if k not in gone}
    assert json.loads(cli("sessions", "count", "-o", "json", env=env).stdout)["sessions"] == 26


def test_indexes_and_stats_cover_every_database(deployment):
    args = ["--uri", deployment.primary, "--backend", "postgres", "--shards", deployment.shard_list]
    validated = cli("indexes", "validate", *args, "-o", "json")
    assert validated.exit_code == 0, validated.output
    targets = {row["target"].split(":")[0] for row in json.loads(validated.stdout)["indexes"]}
    assert targets == {"primary", "shard 0", "shard 1", "shard 2"}


def test_export_import_and_copy_place_sessions_on_the_target_shards(deployment, sharded_sql, tmp_path):
    other = sharded_sql.make(2)
    archive = tmp_path / "all.jsonl"
    src = ["--uri", deployment.primary, "--backend", "postgres", "--shards", deployment.shard_list]
    exported = cli("sessions", "export", *src, "--with-events", "--out", str(archive))
    assert exported.exit_code == 0, exported.output
    imported = cli("sessions", "import", "--uri", other.primary, "--backend", "postgres",
                   "--shards", other.shard_list, str(archive), "--apply", "--yes")
    assert imported.exit_code == 0, imported.output
    for i, url in enumerate(other.shards):
        with psycopg.connect(url) as conn:
            ids = {r[0] for r in conn.execute("SELECT session_id FROM semvec_session_state")}
        assert ids == {sid for sid in deployment.sessions if shard_index(sid, 2) == i}
    third = sharded_sql.make(3)
    copied = cli("sessions", "copy", "--from", deployment.primary, "--from-shards", deployment.shard_list,
                 "--to", third.primary, "--to-shards", third.shard_list, "--with-events",
                 "--apply", "--yes")
    assert copied.exit_code == 0, copied.output
    counted = cli("sessions", "count", "--uri", third.primary, "--backend", "postgres",
                  "--shards", third.shard_list, "-o", "json")
    assert json.loads(counted.stdout)["sessions"] == 30
    ambiguous = cli("sessions", "copy", "--from", deployment.primary, "--to", third.primary,
                    "--shards", deployment.shard_list)
    assert ambiguous.exit_code == 2 and "--from-shards" in ambiguous.output


def test_a_shard_list_for_a_store_without_shards_is_a_usage_error(redis_url):
    result = cli("sessions", "count", "--uri", redis_url, "--shards", "postgresql://h/db")
    assert result.exit_code == 2 and "postgres or pgvector" in result.output


def test_load_run_writes_on_every_shard_and_leaves_nothing(sharded_sql):
    import time

    args = ["--uri", sharded_sql.primary, "--backend", "postgres", "--shards", sharded_sql.shard_list]
    ran = cli("load", "run", *args, "--duration", "1", "--sessions", "40", "--writers", "2",
              "--apply", "--yes", "-o", "json")
    assert ran.exit_code == 0, ran.output

    def inserted(url: str) -> int:
        with psycopg.connect(url, autocommit=True) as conn:
            return int(conn.execute("SELECT coalesce(sum(n_tup_ins), 0) FROM pg_stat_user_tables"
                                    " WHERE relname = 'semvec_session_state'").fetchone()[0])

    deadline = time.monotonic() + 30  # the server publishes its counters within a second or so
    while not all(counts := [inserted(u) for u in sharded_sql.shards]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(counts), counts
    left = cli("sessions", "count", *args, "--match", "semvec-load-*", "-o", "json")
    assert json.loads(left.stdout)["sessions"] == 0


def test_pgvector_items_live_on_their_sessions_shard_and_select_the_backend(sharded_sql):
    from backends.contract import MemoryItem
    from backends.pgvector import PgVectorAdapter

    adapter = PgVectorAdapter(sharded_sql.primary, shards=sharded_sql.shard_list, dimensions=2)
    try:
        items = [MemoryItem(item_id=f"i{k}", text=f"note {k}", embedding=(1.0, float(k))) for k in range(3)]
        adapter.sync_items("vec-session", items)
        home = sharded_sql.shards[shard_index("vec-session", 3)]
        with psycopg.connect(home) as conn:
            assert conn.execute("SELECT count(*) FROM semvec_memory_items").fetchone()[0] == 3
        assert [i.item_id for i in adapter.iter_live_items("vec-session")] == ["i0", "i1", "i2"]
        assert adapter.item_mirror_size()["items"] == 3
    finally:
        adapter.close()
    resolved = cli("backends", "resolve", "--uri", sharded_sql.primary, "--shards",
                   sharded_sql.shard_list, "-o", "json")
    assert resolved.exit_code == 0, resolved.output
    body = json.loads(resolved.stdout)
    assert body["resolved"] == "pgvector"
    assert f"shard {shard_index('vec-session', 3)} of the deployment" in body["chosen_by"]


def test_migrate_from_one_server_to_a_sharded_deployment_places_every_session(deployment, sharded_sql,
                                                                             pgvector_url, tmp_path):
    """A live migration from a sharded deployment into another one of 2 shards, bulk and
    cutover: every session on its target shard, identical."""
    target = sharded_sql.make(2)
    state = str(tmp_path / "m.state")
    sides = ["--from", deployment.primary, "--from-shards", deployment.shard_list,
             "--to", target.primary, "--to-shards", target.shard_list]
    ran = cli("migrate", "run", *sides, "--state", state, "--apply", "--yes")
    assert ran.exit_code == 0, ran.output
    cut = cli("migrate", "cutover", *sides, "--state", state, "--quiet-window", "0.1",
              "--receipt", str(tmp_path / "r.json"), "--apply", "--yes")
    assert cut.exit_code == 0, cut.output
    for i, url in enumerate(target.shards):
        with psycopg.connect(url) as conn:
            ids = {r[0] for r in conn.execute("SELECT session_id FROM semvec_session_state")}
            events = {r[0] for r in conn.execute("SELECT DISTINCT session_id FROM semvec_memory_events")}
        assert ids == {sid for sid in deployment.sessions if shard_index(sid, 2) == i}
        assert events <= ids


@pytest.mark.parametrize("entry", ["redis://x:6379/0", "postgresql+foo://u:hunter2@h/d", "nope"])
def test_a_shard_entry_that_is_not_postgresql_is_a_usage_error_naming_it(entry):
    for extra in ([], ["--backend", "postgres"]):
        result = cli("sessions", "count", "--uri", "postgresql://u:pw@127.0.0.1:1/x", *extra,
                     "--shards", f"postgresql://h/a,{entry}")
        assert result.exit_code == 2, result.output
        assert "entry 1" in result.output and "hunter2" not in result.output
        assert "Traceback" not in result.output
