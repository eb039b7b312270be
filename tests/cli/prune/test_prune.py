"""`semvecctl sessions prune --idle-for DURATION` on the suite's real Redis (write time
from the remaining idle TTL) and PostgreSQL (`updated_at`), and on MongoDB through
mongomock (a fake; no real MongoDB runs here). A session written while a prune runs
must survive: tested on the backend API between judging and deleting."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from backends.archive import ArchiveReader
from backends.ops.prune import PruneResult, archive_idle, archived_sessions, delete_idle, find_idle
from semvecctl.app import app
from semvecctl.commands.sessions_prune import parse_duration
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import make_target

TTL = 400_000  # above the two days the oldest session is aged by
BACKENDS = [pytest.param("redis", marks=pytest.mark.redis),
            pytest.param("postgres", marks=pytest.mark.postgres),
            pytest.param("pgvector", marks=pytest.mark.postgres),
            pytest.param("postgres-sharded", marks=pytest.mark.postgres),
            "mongo"]


def run(target, *args: str):
    """On Redis (no stored write time) the idle TTL the sessions were written with is
    stated with --assume-ttl, as an operator must (the ambient variable alone is refused)."""
    extra = (["--assume-ttl", f"{TTL}s"] if "SEMVEC_REDIS_SESSION_TTL_S" in target.env
             and args[:2] == ("sessions", "prune") else [])
    return CliRunner().invoke(app, [*args, *target.args, *extra], env=target.env)


@pytest.fixture(params=BACKENDS)
def target(request):
    options = {"ttl_seconds": TTL} if request.param == "redis" else {}
    return make_target(request, request.param, **options)


def age(target, session_id: str, seconds: int) -> None:
    """Make a session look last written ``seconds`` ago, the way each store records it."""
    if target.name == "redis":
        import redis

        client = redis.Redis.from_url(target.args[1])
        client.expire(f"semvec:state:{session_id}", TTL - seconds)
        client.close()
    elif target.name == "mongo":
        from tests.support.fixtures.mongo import CLI_STATE

        db = CLI_STATE["client"][CLI_STATE["database"]]
        db["semvec_session_state"].update_one(
            {"_id": session_id},
            {"$set": {"updated_at": datetime.now(timezone.utc) - timedelta(seconds=seconds)}})
    else:
        import psycopg

        for url in target.databases:  # every database of a sharded deployment
            with psycopg.connect(url) as conn:
                conn.execute("UPDATE semvec_session_state SET updated_at = updated_at - "
                             "make_interval(secs => %s) WHERE session_id = %s",
                             (seconds, session_id))


@pytest.fixture
def sessions(target):
    """Four sessions: two idle for two days (one owned by acme), one idle an hour, one fresh."""
    tag = uuid.uuid4().hex[:8]
    store = target.adapter.state_store()
    names = {k: f"{tag}-{k}" for k in ("old", "old-acme", "hour", "fresh")}
    for key, sid in names.items():
        store.save(sid, f"blob {key}".encode(), expected_version=None,
                   owner_subject="acme" if key == "old-acme" else None)
    age(target, names["old"], 2 * 86400)
    age(target, names["old-acme"], 2 * 86400)
    age(target, names["hour"], 3600)
    return names


def _assumed(target) -> dict:
    return {"assume_ttl": TTL} if target.name == "redis" else {}


def listed(result) -> dict[str, str]:
    assert result.exit_code == 0, result.output
    return {r["session_id"]: r["action"] for r in map(json.loads, result.stdout.splitlines())}


def test_preview_lists_the_idle_sessions_and_deletes_nothing(target, sessions):
    result = run(target, "sessions", "prune", "--idle-for", "1d", "-o", "jsonl")
    assert listed(result) == {sessions["old"]: "would delete", sessions["old-acme"]: "would delete"}
    assert "nothing was deleted" in result.stderr
    store = target.adapter.state_store()
    assert all(store.load(sid) is not None for sid in sessions.values())


def test_apply_deletes_only_the_idle_sessions_in_scope(target, sessions):
    result = run(target, "sessions", "prune", "--idle-for", "30m", "--owner", "acme", "--apply", "--yes",
                 "-o", "jsonl")
    assert listed(result) == {sessions["old-acme"]: "deleted"}
    result = run(target, "sessions", "prune", "--idle-for", "30m", "--match", "*-old*", "--apply",
                 "--yes", "-o", "jsonl")
    assert listed(result) == {sessions["old"]: "deleted"}
    store = target.adapter.state_store()
    assert store.load(sessions["hour"]) is not None and store.load(sessions["fresh"]) is not None
    assert store.load(sessions["old"]) is None


def test_apply_without_yes_and_no_tty_is_refused(target, sessions):
    result = run(target, "sessions", "prune", "--idle-for", "1d", "--apply")
    assert result.exit_code != 0 and "--yes" in result.output
    assert target.adapter.state_store().load(sessions["old"]) is not None


def test_archive_first_holds_exactly_what_is_deleted(target, sessions, tmp_path):
    path = tmp_path / "pruned.jsonl"
    result = run(target, "sessions", "prune", "--idle-for", "1d", "--archive", str(path), "--apply",
                 "--yes", "-o", "jsonl")
    assert listed(result) == {sessions["old"]: "deleted", sessions["old-acme"]: "deleted"}
    with ArchiveReader(path) as reader:
        archived = {r.session_id: r for r in reader.sessions()}
    assert set(archived) == {sessions["old"], sessions["old-acme"]}
    assert archived[sessions["old"]].blob == b"blob old"
    imported = run(target, "sessions", "import", str(path), "--apply", "--yes", "--allow-loss")
    assert imported.exit_code == 0, imported.output
    assert target.adapter.state_store().load(sessions["old"])[0] == b"blob old"


def test_a_session_written_during_the_run_survives(target, sessions):
    adapter = target.adapter
    result = PruneResult()
    judged = list(find_idle(adapter, timedelta(days=1), result, **_assumed(target)))
    assert {i.session_id for i in judged} == {sessions["old"], sessions["old-acme"]}
    adapter.state_store().save(sessions["old"], b"written meanwhile", expected_version=1)
    outcomes = {i.session_id: a for i, a in delete_idle(adapter, judged, result)}
    assert outcomes == {sessions["old"]: "kept", sessions["old-acme"]: "deleted"}
    assert adapter.state_store().load(sessions["old"])[0] == b"written meanwhile"
    assert (result.deleted, result.kept) == (1, 1)


def test_a_session_written_after_archiving_survives_and_stays_in_the_archive(target, sessions, tmp_path):
    adapter = target.adapter
    path = tmp_path / "a.jsonl"
    result = PruneResult()
    archive_idle(adapter, find_idle(adapter, timedelta(days=1), result, **_assumed(target)), path,
                 result, source_uri="test")
    adapter.state_store().save(sessions["old-acme"], b"again", expected_version=1, owner_subject="acme")
    outcomes = {i.session_id: a for i, a in delete_idle(adapter, archived_sessions(path), result)}
    assert outcomes == {sessions["old"]: "deleted", sessions["old-acme"]: "kept"}


@pytest.mark.redis
def test_redis_without_an_idle_ttl_keeps_no_write_time(request):
    target = make_target(request, "redis")
    target.adapter.state_store().save("s", b"x", expected_version=None)
    result = run(target, "sessions", "prune", "--idle-for", "1d", "--apply", "--yes")
    assert result.exit_code == 3
    assert "keeps no time of a session's last write" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert target.adapter.state_store().load("s") is not None


@pytest.mark.redis
def test_redis_sessions_without_expiry_are_never_guessed(request):
    target = make_target(request, "redis", ttl_seconds=TTL)
    target.adapter.state_store().save("persisted", b"x", expected_version=None)
    import redis

    client = redis.Redis.from_url(target.args[1])
    client.persist("semvec:state:persisted")
    client.close()
    result = run(target, "sessions", "prune", "--idle-for", "1s", "--apply", "--yes", "-o", "jsonl")
    assert result.exit_code == 0 and result.stdout == ""
    assert "1 without a known write time" in result.stderr


def test_memory_keeps_no_write_time():
    result = CliRunner().invoke(app, ["sessions", "prune", "--idle-for", "1d", "--backend", "memory"])
    assert result.exit_code == 3


@pytest.mark.parametrize("text,seconds", [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400),
                                          ("45s", 45), ("1d12h", 129600), (" 2H ", 7200)])
def test_durations(text, seconds):
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["0s", "3651d", "1w", "", "10", "-5m", "nan", "1.5h"])
def test_durations_outside_the_declared_range_or_form_are_usage_errors(text):
    result = CliRunner().invoke(app, ["sessions", "prune", "--idle-for", text, "--backend", "memory"])
    assert result.exit_code == 2, (text, result.output)
