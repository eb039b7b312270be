"""Opt-in (engine job): the deployed engine 0.8.9 on a 3-shard deployment of its own
(``DATABASE_URL`` + ``SEMVEC_STATE_DB_SHARDS``, one database each on the suite's server)
writes sessions with audited turns; semvecctl, given only the engine's two variables, sees
every session and event; after ``erase`` the engine resumes none of the subject's sessions
on any shard and every other session as it left it."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from typer.testing import CliRunner

from semvecctl.app import app

pytestmark = [pytest.mark.postgres, pytest.mark.engine]

engine_adapter = pytest.importorskip("semvec.api.postgres_backend_adapter",
                                     reason="the semvec engine (with sqlalchemy) is not installed")


def _engine_url(url: str) -> str:
    """The engine's spelling of a suite URL, naming the driver this run tests."""
    from tests.support.fixtures.engine import engine_database_url

    return engine_database_url(url)


def _plain(url: str) -> str:
    """A driver-spelled URL back to the plain one psycopg connects with."""
    scheme, rest = url.split("://", 1)
    return f"postgresql://{rest}"


@pytest.fixture
def engine_deployment(sharded_sql, monkeypatch):
    from semvec.api import database

    env = {"DATABASE_URL": _engine_url(sharded_sql.primary),
           "SEMVEC_STATE_DB_SHARDS": ",".join(_engine_url(u) for u in sharded_sql.shards)}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    database.reset_engine()
    database.create_tables()
    try:
        yield engine_adapter.PostgresBackendAdapter(), env
    finally:
        database.reset_engine()


def _dump(env: dict[str, str]) -> dict[str, str]:
    """Every row of every table of every database of the deployment."""
    from tests.support.maintenance import _pg_dump

    urls = [env["DATABASE_URL"], *env["SEMVEC_STATE_DB_SHARDS"].split(",")]
    return {f"{key} @{i}": value for i, url in enumerate(urls)
            for key, value in _pg_dump(_plain(url))().items()}


def _write(engine, sessions: list[str]) -> dict[str, int]:
    from semvec.api.owner_scope import OwnerScope
    from semvec.compliance.event_store import MemoryEvent

    scope = OwnerScope("tenant-a")
    base = datetime.now(timezone.utc) - timedelta(hours=1)
    versions = {}
    for n, sid in enumerate(sessions):
        user = "alice" if n < 4 else f"user-{n % 5}"
        version = None
        for turn in range(2):
            event = MemoryEvent(event_id=uuid.uuid4(), user_id=user, content=f"{sid} turn {turn}",
                                created_at=base + timedelta(seconds=2 * n + turn), embedding=[0.5, 0.5],
                                meta={}, owner_subject="tenant-a", session_id=sid)
            version = engine.commit_turn(sid, f"{sid}-{turn}".encode(), expected_version=version,
                                         scope=scope, events=[event])
        versions[sid] = version
    return versions


def test_engine_shards_are_seen_whole_and_erase_reaches_every_shard(engine_deployment, tmp_path):
    from semvec.api.owner_scope import OwnerScope

    engine, env = engine_deployment
    sessions = [f"eng-{n:02d}" for n in range(30)]
    versions = _write(engine, sessions)
    env = {**env, "SEMVEC_SESSION_BACKEND": "postgres"}

    def cli(*args):
        return CliRunner().invoke(app, list(args), env=env)

    counted = cli("sessions", "count", "-o", "json")
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["sessions"] == 30
    listed = cli("sessions", "list", "-o", "json")
    assert sorted(r["session_id"] for r in json.loads(listed.stdout)) == sessions
    alice = cli("events", "list", "--user", "alice", "-o", "json")
    assert alice.exit_code == 0 and len(json.loads(alice.stdout)) == 8
    assert cli("doctor").exit_code == 0
    # the engine's own event reader opens the primary only (ENGINE-WIRE section 7)
    assert engine.event_store().list_by_user("alice") == []

    dump_before = _dump(env)
    receipt = tmp_path / "erase.json"
    erased = cli("erase", "--user", "alice", "--owner", "tenant-a", "--apply", "--yes",
                 "--receipt", str(receipt))
    assert erased.exit_code == 0, erased.output
    body = json.loads(receipt.read_text())
    assert (body["states_deleted"], body["events_deleted"]) == (4, 8)
    scope = OwnerScope("tenant-a")
    for sid in sessions[:4]:
        assert engine.state_store().load(sid, scope=scope) is None
    for sid in sessions[4:]:
        assert engine.state_store().load(sid, scope=scope) == (f"{sid}-1".encode(), versions[sid])
    assert json.loads(cli("sessions", "count", "-o", "json").stdout)["sessions"] == 26
    # nothing but the subject's rows went, on any database; the one addition is our erasure
    # ledger, on the primary only (@0), in tables the engine never reads, naming no id
    alice = set(sessions[:4])
    after = _dump(env)
    ledger = {k for k in after if k.startswith("semvecctl_erasure_")}
    assert ledger and all(k.endswith(" @0") for k in ledger)
    assert not any("alice" in k or "tenant-a" in k for k in ledger)
    assert {k: v for k, v in after.items() if k not in ledger} == {
        k: v for k, v in dump_before.items()
        if not ('"alice"' in k or any(f'"session_id":"{sid}"' in k for sid in alice))}


def test_doctor_finds_a_misplaced_copy_of_an_engine_session_and_the_fix_keeps_the_engines_row(
        engine_deployment):
    from semvec.api.owner_scope import OwnerScope

    from backends.postgres.placement import shard_index

    engine, env = engine_deployment
    sessions = [f"mis-{n:02d}" for n in range(12)]
    versions = _write(engine, sessions)
    victim = sessions[5]
    home = shard_index(victim, 3)
    shards = [_plain(u) for u in env["SEMVEC_STATE_DB_SHARDS"].split(",")]
    with psycopg.connect(shards[home]) as src, psycopg.connect(shards[(home + 1) % 3]) as dst:
        row = src.execute("SELECT session_id, state_blob, version - 1, drift_exempt, owner_subject,"
                          " pending_message, updated_at FROM semvec_session_state WHERE session_id = %s",
                          (victim,)).fetchone()
        dst.execute("INSERT INTO semvec_session_state (session_id, state_blob, version, drift_exempt,"
                    " owner_subject, pending_message, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s)", row)
    env = {**env, "SEMVEC_SESSION_BACKEND": "postgres"}

    def cli(*args):
        return CliRunner().invoke(app, list(args), env=env)

    found = cli("doctor", "-o", "json")
    assert victim in found.stdout and "placement" in found.stdout, found.output
    fixed = cli("doctor", "--fix", "--apply", "--yes")
    assert fixed.exit_code == 0, fixed.output
    clean = cli("doctor", "-o", "json")
    assert clean.exit_code == 0 and victim not in clean.stdout, clean.output
    assert engine.state_store().load(victim, scope=OwnerScope("tenant-a")) == (
        f"{victim}-1".encode(), versions[victim])


def test_the_engine_grows_from_3_to_4_shards_under_its_own_writer_losing_nothing(
        engine_deployment, sharded_sql, tmp_path, monkeypatch):
    """``shards run --follow`` (SIGKILLed once, then resumed) while the engine writes turns
    on the old list, cutover once it stops, the engine switched to the printed list: it
    resumes every session at the version it last wrote; every event is stored once, and
    after ``doctor --fix --apply`` every session once, on its shard."""
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    from semvec.api import database
    from semvec.api.owner_scope import OwnerScope
    from semvec.compliance.event_store import MemoryEvent as EngineEvent

    from backends.postgres import PostgresAdapter
    from backends.postgres.placement import shard_index
    from tests.cli.shards.test_shards import _count_copied

    engine, env = engine_deployment
    sessions = [f"grow-{n:02d}" for n in range(60)]
    versions = _write(engine, sessions)
    blobs = {sid: f"{sid}-1".encode() for sid in sessions}
    written = {sid: 2 for sid in sessions}
    extra = _engine_url(sharded_sql.make(1).shards[0])
    old = env["SEMVEC_STATE_DB_SHARDS"]
    new = f"{old},{extra}"
    moved = [s for s in sessions if shard_index(s, 3) != shard_index(s, 4)]
    assert moved
    scope = OwnerScope("tenant-a")
    stop, errors = threading.Event(), []

    def engine_pod():  # the engine keeps writing on the old list
        n = 0
        try:
            while not stop.is_set():
                sid = sessions[n % len(sessions)]
                blob = f"{sid}-live-{n}".encode()
                event = EngineEvent(event_id=uuid.uuid4(), user_id="live", content=f"live {n}",
                                    created_at=datetime.now(timezone.utc), embedding=[0.5, 0.5],
                                    meta={}, owner_subject="tenant-a", session_id=sid)
                versions[sid] = engine.commit_turn(sid, blob, expected_version=versions[sid],
                                                   scope=scope, events=[event])
                blobs[sid], written[sid] = blob, written[sid] + 1
                n += 1
                time.sleep(0.02)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    state = str(tmp_path / "grow.state")
    cli_env = {**os.environ, **env, "SEMVEC_SESSION_BACKEND": "postgres", "NO_COLOR": "1"}
    follow = [sys.executable, "-m", "semvecctl", "shards", "run", "--to-shards", new,
              "--state", state, "--follow", "--interval", "0.2", "--batch-size", "2",
              "--apply", "--yes"]
    pod = threading.Thread(target=engine_pod, daemon=True)
    pod.start()
    try:
        first = subprocess.Popen(follow + ["--max-passes", "50"], env=cli_env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while _count_copied(state) < 3 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert first.returncode == -signal.SIGKILL, first.stderr.read().decode()[-2000:]
        resumed = subprocess.run(follow + ["--max-passes", "5"], env=cli_env,
                                 capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
    finally:
        stop.set()
        pod.join(10)
    assert not errors, errors
    cut = subprocess.run([sys.executable, "-m", "semvecctl", "shards", "cutover", "--to-shards", new,
                          "--state", state, "--quiet-window", "0.2", "--apply", "--yes"],
                         env=cli_env, capture_output=True, text=True, timeout=300)
    assert cut.returncode == 0, cut.stdout[-2000:] + cut.stderr[-2000:]
    assert "SEMVEC_STATE_DB_SHARDS" in cut.stdout + cut.stderr

    # the engine switched to the new list
    monkeypatch.setenv("SEMVEC_STATE_DB_SHARDS", new)
    database.reset_engine()
    database.create_tables()
    switched = engine_adapter.PostgresBackendAdapter()
    for sid in sessions:
        assert switched.state_store().load(sid, scope=scope) == (blobs[sid], versions[sid]), sid
    fixed = CliRunner().invoke(app, ["doctor", "--fix", "--apply", "--yes"],
                               env={**env, "SEMVEC_STATE_DB_SHARDS": new,
                                    "SEMVEC_SESSION_BACKEND": "postgres"})
    assert fixed.exit_code == 0, fixed.output
    plain = [_plain(u) for u in new.split(",")]
    ours = PostgresAdapter(env["DATABASE_URL"], shards=new)
    try:
        for i, url in enumerate(plain):
            with psycopg.connect(url) as conn:
                ids = sorted(r[0] for r in conn.execute("SELECT session_id FROM semvec_session_state"))
            assert ids == sorted(s for s in sessions if shard_index(s, 4) == i)
        per_session: dict[str, int] = {}
        seen: set[str] = set()
        for user in {"alice", "live", *(f"user-{n % 5}" for n in range(60))}:
            for event in ours.event_store().list_events(user):
                assert event.event_id not in seen
                seen.add(event.event_id)
                per_session[event.session_id] = per_session.get(event.session_id, 0) + 1
        assert per_session == written
    finally:
        ours.close()


def test_the_engine_grows_3_to_4_and_shrinks_back_with_dsns_without_passwords(
        engine_deployment, sharded_sql, tmp_path, monkeypatch):
    """semvec 0.8.9 on 3 shards whose DSNs carry a user and no password: grow to 4, the
    engine switched to the list the cutover printed (exactly that list), then shrink back
    to 3: the printed list is again exactly the list, the doctor command the shrink's
    cutover names leaves nothing on the dropped database, the engine resumes every session
    where it left it, and an erase afterwards finds nothing of the subject anywhere."""
    import shlex

    from semvec.api import database
    from semvec.api.owner_scope import OwnerScope

    engine, env = engine_deployment
    old = env["SEMVEC_STATE_DB_SHARDS"]
    assert all(":" not in u.split("://")[1].split("@")[0] for u in old.split(","))  # no password
    sessions = [f"ends-{n:02d}" for n in range(40)]
    versions = _write(engine, sessions)
    extra = _engine_url(sharded_sql.make(1).shards[0])
    new = f"{old},{extra}"
    scope = OwnerScope("tenant-a")

    def cli(shards, *args):
        return CliRunner().invoke(app, list(args), env={**env, "SEMVEC_STATE_DB_SHARDS": shards,
                                                        "SEMVEC_SESSION_BACKEND": "postgres"})

    def reshard(shards, to, name):
        state = str(tmp_path / f"{name}.state")
        run = cli(shards, "shards", "run", "--to-shards", to, "--state", state, "--apply", "--yes")
        assert run.exit_code == 0, run.output
        status = cli(shards, "shards", "status", "--backend", "postgres", "--state", state,
                     "-o", "json")
        assert status.exit_code == 0 and json.loads(status.stdout)["cutover_possible"], status.output
        cut = cli(shards, "shards", "cutover", "--to-shards", to, "--state", state,
                  "--quiet-window", "0", "--receipt", state + ".json", "--apply", "--yes")
        assert cut.exit_code == 0, cut.output
        (line,) = [ln for ln in cut.stderr.splitlines() if "SEMVEC_STATE_DB_SHARDS=" in ln]
        assert line.strip() == f"SEMVEC_STATE_DB_SHARDS={to}", line  # the list, exactly
        return cut

    def switch(shards):
        monkeypatch.setenv("SEMVEC_STATE_DB_SHARDS", shards)
        database.reset_engine()
        database.create_tables()
        return engine_adapter.PostgresBackendAdapter()

    reshard(old, new, "grow")
    grown = switch(new)
    for sid in sessions:
        assert grown.state_store().load(sid, scope=scope) == (f"{sid}-1".encode(), versions[sid])
    assert cli(new, "doctor", "--fix", "--apply", "--yes").exit_code == 0
    for sid in sessions[4:12]:  # the engine writes on the grown list
        versions[sid] = grown.commit_turn(sid, f"{sid}-grown".encode(),
                                          expected_version=versions[sid], scope=scope)

    cut = reshard(new, old, "shrink")
    (command,) = [ln.split("remove them with: ", 1)[1] for ln in cut.stderr.splitlines()
                  if "--shards-from" in ln]
    words = shlex.split(command)
    assert words[0] == "semvecctl" and "--shards-from" in words
    dropped = _plain(extra)
    with psycopg.connect(dropped) as conn:
        left = conn.execute("SELECT count(*) FROM semvec_session_state").fetchone()[0]
    assert left > 0  # the moved sessions' old copies, until the named command runs
    shrunk = switch(old)
    cleaned = CliRunner().invoke(app, [*words[1:], "--yes"], env={**env, "SEMVEC_SESSION_BACKEND":
                                                                  "postgres"})
    assert cleaned.exit_code == 0, cleaned.output
    with psycopg.connect(dropped) as conn:
        for table in ("semvec_session_state", "semvec_memory_events"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
    for n, sid in enumerate(sessions):
        blob = f"{sid}-grown".encode() if 4 <= n < 12 else f"{sid}-1".encode()
        assert shrunk.state_store().load(sid, scope=scope) == (blob, versions[sid]), sid

    receipt = tmp_path / "erase.json"
    erased = cli(old, "erase", "--user", "alice", "--owner", "tenant-a", "--apply", "--yes",
                 "--receipt", str(receipt))
    assert erased.exit_code == 0, erased.output
    for sid in sessions[:4]:
        assert shrunk.state_store().load(sid, scope=scope) is None
    for url in [env["DATABASE_URL"], *new.split(",")]:
        with psycopg.connect(_plain(url)) as conn:
            ids = {r[0] for r in conn.execute("SELECT session_id FROM semvec_session_state")}
            users = {r[0] for r in conn.execute("SELECT user_id FROM semvec_memory_events")}
        assert not ids & set(sessions[:4]) and "alice" not in users, url
