"""Copies, exports and imports that verify what they claim and keep order and clocks
(#23 findings 3 and 4, #24 Build 3 and 6).

Redis and PostgreSQL+pgvector are the suite's real servers (pgvector's event table is the
engine's SQL layout: no sequence column, events read back with sequence 0). MongoDB is
``mongomock`` (no real MongoDB on our machines), injected through ``--to-adapter``.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryEvent
from semvecctl.app import app
from tests.support import transfer_doubles

UTC = timezone.utc
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
DIMS = 8
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture
def redis(redis_url):
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(redis_url)
    yield adapter
    adapter.close()


@pytest.fixture
def redis2(redis_server, redis_url):
    """A second, clean database on the suite's Redis (db 5), and its URL."""
    from backends.redis import RedisBackendAdapter

    with redis_server.client(db=5) as client:
        client.flushdb()
    url = redis_url.rsplit("/", 1)[0] + "/5"
    adapter = RedisBackendAdapter(url)
    yield adapter, url
    adapter.close()
    with redis_server.client(db=5) as client:
        client.flushdb()


@pytest.fixture
def pgvector(pgvector_adapter_factory):
    return pgvector_adapter_factory(dimensions=DIMS)


@pytest.fixture
def pg2(postgres_server):
    """A second PostgreSQL database of its own, with its URL."""
    from backends.pgvector import PgVectorAdapter

    dbname = postgres_server.take_database()
    url = postgres_server.url(dbname)
    adapter = PgVectorAdapter(url, dimensions=DIMS)
    try:
        yield adapter, url
    finally:
        adapter.close()
        with contextlib.suppress(Exception):
            postgres_server.drop_database(dbname)


def event(user: str, session: str, minute: float, *, event_id: str | None = None,
          owner: str = "acme") -> MemoryEvent:
    return MemoryEvent(event_id=event_id or str(uuid.uuid4()), user_id=user,
                       content=f"at {minute}", created_at=T0 + timedelta(minutes=minute),
                       embedding=(0.5, -0.25, 0.125), meta={"m": minute}, owner_subject=owner,
                       session_id=session)


def sql(url: str, statement: str, *args) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement, args)


def seed_sessions(adapter, tag: str, n: int = 4) -> list[str]:
    store = adapter.state_store()
    ids = [f"{tag}-s{i}" for i in range(n)]
    for i, sid in enumerate(ids):
        store.save(sid, f"blob {i}".encode(), expected_version=None, owner_subject="acme")
        store.save(sid, f"blob {i} v2".encode(), expected_version=1, owner_subject="acme",
                   pending_message="ok?" if i == 1 else None)
    return ids


# -- 1. a resumed copy compares what it skipped ------------------------------------------


def test_resumed_copy_compares_skipped_sessions_redis_to_postgres(redis, redis_url, pgvector,
                                                                  pgvector_url, monkeypatch):
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", str(DIMS))
    tag = uuid.uuid4().hex[:8]
    ids = seed_sessions(redis, tag)
    args = ("sessions", "copy", "--from", redis_url, "--to", pgvector_url, "--match", f"{tag}-*",
            "--apply", "--yes", "--on-conflict", "skip", "-o", "json")
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    # the rerun of an unchanged copy: every session skipped, and truly the same
    same = invoke(*args)
    assert same.exit_code == 0, same.output
    doc = json.loads(same.stdout)
    assert doc["skipped"] == 4 and doc["verified"]["mismatched"] == 0
    assert doc["verified"]["matched"] == 4 and "versions match" in same.stderr
    # the source moves on (a live writer) and someone edits a target row by hand
    redis.state_store().save(ids[0], b"moved on", expected_version=2, owner_subject="acme")
    sql(pgvector_url, "UPDATE semvec_session_state SET state_blob = %s WHERE session_id = %s",
        b"hand edited", ids[2])
    resumed = invoke(*args)
    assert resumed.exit_code == 1, resumed.output
    doc = json.loads(resumed.stdout)
    assert doc["skipped"] == 4 and doc["verified"]["mismatched"] == 2
    examples = " ".join(doc["verified"]["examples"])
    assert repr(ids[0]) in examples and repr(ids[2]) in examples
    assert repr(ids[1]) not in examples and repr(ids[3]) not in examples
    assert "versions match" not in resumed.stderr and "match" not in resumed.stderr.splitlines()[-1]
    assert f"read-back mismatch: {ids[0]!r}" in resumed.stderr
    # left as it is: skip never overwrites
    assert pgvector.state_store().load(ids[2])[0] == b"hand edited"


def test_resumed_copy_compares_version_owner_and_pending_postgres_to_redis(
        pgvector, pgvector_url, redis, redis_url):
    tag = uuid.uuid4().hex[:8]
    ids = seed_sessions(pgvector, tag)
    args = ("sessions", "copy", "--from", pgvector_url, "--to", redis_url, "--match", f"{tag}-*",
            "--apply", "--yes", "--on-conflict", "skip")
    assert invoke(*args).exit_code == 0
    import redis as redis_py

    client = redis_py.Redis.from_url(redis_url)
    try:
        client.hset(f"semvec:state:{ids[1]}", "pending", "")          # pending differs
        client.hset(f"semvec:state:{ids[2]}", "owner", "globex")      # owner differs
        client.hset(f"semvec:state:{ids[3]}", "version", "7")         # version differs
    finally:
        client.close()
    resumed = invoke(*args)
    assert resumed.exit_code == 1, resumed.output
    assert f"{ids[1]!r}: pending message differs" in resumed.stderr
    assert f"{ids[2]!r}: owner differs" in resumed.stderr
    assert f"{ids[3]!r}: version 7 on the target, 2 expected" in resumed.stderr
    assert repr(ids[0]) not in resumed.stderr.replace(f"{ids[0]!r}:", "")  # s0 matched
    assert "read-back found 3 session(s) that differ from the source" in resumed.stderr


# -- 2. a copy that would leave events behind --------------------------------------------


def test_copy_without_events_from_a_store_with_events_is_a_loss_redis(redis, redis_url, redis2):
    target, target_url = redis2
    tag = uuid.uuid4().hex[:8]
    ids = seed_sessions(redis, tag, 2)
    log = redis.event_store()
    for k in range(3):
        log.append(event(f"{tag}-u", ids[k % 2], k))
    log.append(event(f"{tag}-other", "", 9))  # of no session: not the copy's to carry
    args = ("sessions", "copy", "--from", redis_url, "--to", target_url, "--match", f"{tag}-*",
            "--apply", "--yes")
    refused = invoke(*args)
    assert refused.exit_code == 1, refused.output
    line = [l for l in refused.stderr.splitlines() if l.startswith("error: ")]
    assert len(line) == 1 and "3 event(s)" in line[0]
    assert "--with-events" in line[0] and "--allow-loss" in line[0] and "nothing was written" in line[0]
    assert list(target.iter_sessions()) == []
    carried = invoke(*args, "--with-events")
    assert carried.exit_code == 0, carried.output
    assert "3 event(s) restored" in carried.stderr
    assert target.event_store().count_for_user(f"{tag}-u") == 3


def test_copy_without_events_from_postgres_is_a_loss_unless_accepted(pgvector, pgvector_url,
                                                                      redis, redis_url):
    tag = uuid.uuid4().hex[:8]
    ids = seed_sessions(pgvector, tag, 2)
    pgvector.event_store().append(event(f"{tag}-u", ids[0], 1))
    args = ("sessions", "copy", "--from", pgvector_url, "--to", redis_url, "--match", f"{tag}-*",
            "--apply", "--yes")
    refused = invoke(*args)
    assert refused.exit_code == 1 and "1 event(s)" in refused.stderr
    assert list(redis.iter_sessions()) == []
    accepted = invoke(*args, "--allow-loss")
    assert accepted.exit_code == 0, accepted.output
    assert "accepted loss: 1 event(s)" in accepted.stderr
    assert len(list(redis.iter_sessions())) == 2
    assert redis.event_store().count_for_user(f"{tag}-u") == 0


def test_copy_of_sessions_without_events_is_not_refused(pgvector, pgvector_url, redis, redis_url):
    tag = uuid.uuid4().hex[:8]
    seed_sessions(pgvector, tag, 2)
    pgvector.event_store().append(event(f"{tag}-u", "someone-else", 1))  # another session
    result = invoke("sessions", "copy", "--from", pgvector_url, "--to", redis_url, "--match",
                    f"{tag}-*", "--apply", "--yes")
    assert result.exit_code == 0, result.output
    assert "loss" not in result.stderr


# -- 7. sequence-less logs keep their order --------------------------------------------------


def _scrambled_log(pgvector, tag: str, session: str) -> list[str]:
    """Five events appended newest first with random ids, two of them at the same instant;
    returns the ids in log order (created_at, then event id)."""
    log = pgvector.event_store()
    tie = sorted(str(uuid.uuid4()) for _ in range(2))
    made = [event(f"{tag}-u", session, 4), event(f"{tag}-u", session, 3),
            event(f"{tag}-u", session, 2, event_id=tie[1]),
            event(f"{tag}-u", session, 2, event_id=tie[0]), event(f"{tag}-u", session, 1)]
    for e in made:
        log.append(e)
    return [e.event_id for e in sorted(made, key=lambda e: (e.created_at, e.event_id))]


def test_copy_with_events_numbers_a_sequence_less_log_oldest_first(pgvector, pgvector_url,
                                                                  redis, redis_url):
    tag = uuid.uuid4().hex[:8]
    ids = seed_sessions(pgvector, tag, 1)
    ordered = _scrambled_log(pgvector, tag, ids[0])
    result = invoke("sessions", "copy", "--from", pgvector_url, "--to", redis_url, "--match",
                    f"{tag}-*", "--with-events", "--apply", "--yes", "--allow-loss")
    assert result.exit_code == 0, result.output
    listed = redis.event_store().list_events(f"{tag}-u")
    assert [e.sequence for e in listed] == [1, 2, 3, 4, 5]
    assert [e.event_id for e in listed] == ordered


def test_events_export_of_a_sequence_less_log_imports_oldest_first(pgvector, pgvector_url,
                                                                   redis, redis_url, tmp_path):
    from backends.archive import ArchiveReader

    tag = uuid.uuid4().hex[:8]
    ordered = _scrambled_log(pgvector, tag, f"{tag}-s")
    path = tmp_path / "u.jsonl"
    exported = invoke("events", "export", "--uri", pgvector_url, "--user", f"{tag}-u",
                      "--out", str(path))
    assert exported.exit_code == 0, exported.output
    with ArchiveReader(path) as reader:
        assert reader.header.with_events is True  # the header tells the truth (#24 Build 6)
        (record,) = list(reader.records())
    assert [e.event_id for e in record.events] == ordered
    imported = invoke("sessions", "import", str(path), "--uri", redis_url, "--apply", "--yes")
    assert imported.exit_code == 0, imported.output
    listed = redis.event_store().list_events(f"{tag}-u")
    assert [(e.sequence, e.event_id) for e in listed] == list(enumerate(ordered, 1))


def test_sessions_export_user_of_a_sequence_less_log_is_oldest_first(pgvector, tmp_path):
    from backends.archive import ArchiveReader, UserRecord
    from backends.transfer import export_to_path

    tag = uuid.uuid4().hex[:8]
    ids = seed_sessions(pgvector, tag, 1)
    ordered = _scrambled_log(pgvector, tag, ids[0])
    path = tmp_path / "a.jsonl"
    export_to_path(pgvector, path, source_uri="pg", users=[f"{tag}-u"], allow_loss=True)
    with ArchiveReader(path) as reader:
        assert reader.header.with_events is True
        logs = [r for r in reader.records() if isinstance(r, UserRecord)]
    assert [e.event_id for e in logs[0].events] == ordered


def test_import_numbers_unnumbered_events_of_many_sessions_in_log_order(pgvector, redis, tmp_path):
    """A user's events spread over sessions are numbered by time, not session by session."""
    from backends.transfer import ArchiveFile, SessionImporter, export_to_path

    tag = uuid.uuid4().hex[:8]
    ids = seed_sessions(pgvector, tag, 2)
    log = pgvector.event_store()
    made = [event(f"{tag}-u", ids[k % 2], k) for k in (3, 0, 2, 1)]
    for e in made:
        log.append(e)
    path = tmp_path / "a.jsonl"
    export_to_path(pgvector, path, source_uri="pg", match=f"{tag}-*", with_events=True)
    importer = SessionImporter(redis, ArchiveFile(path), allow_loss=True)
    result = importer.apply()
    assert result.events_restored == 4 and importer.verify_target().ok
    listed = redis.event_store().list_events(f"{tag}-u")
    assert [e.event_id for e in listed] == [e.event_id for e in sorted(made, key=lambda e: e.created_at)]
    assert [e.sequence for e in listed] == [1, 2, 3, 4]


# -- 8. copies keep the clocks --------------------------------------------------------------


OLD = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def test_postgres_to_postgres_copy_keeps_updated_at(pgvector, pgvector_url, pg2, monkeypatch):
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", str(DIMS))
    target, target_url = pg2
    tag = uuid.uuid4().hex[:8]
    ids = seed_sessions(pgvector, tag, 2)
    sql(pgvector_url, "UPDATE semvec_session_state SET updated_at = %s WHERE session_id = %s",
        OLD.replace(tzinfo=None), ids[0])
    before = {sid: pgvector.describe_session(sid).updated_at for sid in ids}
    result = invoke("sessions", "copy", "--from", pgvector_url, "--to", target_url, "--match",
                    f"{tag}-*", "--apply", "--yes", "--keep-versions")
    assert result.exit_code == 0, result.output
    after = {sid: target.describe_session(sid).updated_at for sid in ids}
    assert after == before and after[ids[0]] == OLD


def test_postgres_to_mongo_copy_keeps_updated_at(pgvector, pgvector_url, monkeypatch):
    mongomock = pytest.importorskip("mongomock")
    import tests.support.fixtures.mongo  # noqa: F401 - mongomock compatibility shims
    from backends.mongo import MongoBackendAdapter

    client = mongomock.MongoClient()
    transfer_doubles.MONGO.update(client=client, database=f"t_{uuid.uuid4().hex[:10]}")
    tag = uuid.uuid4().hex[:8]
    ids = seed_sessions(pgvector, tag, 2)
    sql(pgvector_url, "UPDATE semvec_session_state SET updated_at = %s WHERE session_id = %s",
        OLD.replace(tzinfo=None), ids[1])
    result = invoke("sessions", "copy", "--from", pgvector_url,
                    "--to-adapter", "tests.support.transfer_doubles:mongo_shared", "--match",
                    f"{tag}-*", "--apply", "--yes", "--allow-loss")
    assert result.exit_code == 0, result.output
    target = MongoBackendAdapter(client=client, database=transfer_doubles.MONGO["database"])
    assert target.describe_session(ids[1]).updated_at == OLD
    assert target.describe_session(ids[0]).updated_at == pgvector.describe_session(ids[0]).updated_at.replace(
        microsecond=pgvector.describe_session(ids[0]).updated_at.microsecond // 1000 * 1000)
    client.close()


def test_a_target_that_keeps_a_clock_it_cannot_restore_is_a_loss(pgvector, tmp_path):
    from backends.transfer import ArchiveFile, LossyTransfer, SessionImporter, export_to_path
    from backends.transfer.loss import restarts_clocks

    tag = uuid.uuid4().hex[:8]
    seed_sessions(pgvector, tag, 2)
    path = tmp_path / "a.jsonl"
    export_to_path(pgvector, path, source_uri="pg", match=f"{tag}-*")
    target = transfer_doubles.ClockWithoutRestore()
    assert restarts_clocks(target)
    with pytest.raises(LossyTransfer, match=r"2 session write time\(s\)"):
        SessionImporter(target, ArchiveFile(path)).apply()
    assert list(target.iter_sessions()) == []


def test_resumed_copy_with_events_restores_the_events_a_first_pass_did_not_write(
        redis, redis_url, redis2):
    """A first pass that stopped after a session but before its events (simulated by
    deleting them on the target): the rerun with --on-conflict skip restores them and
    leaves the rest as they are."""
    target, target_url = redis2
    tag = uuid.uuid4().hex[:8]
    ids = seed_sessions(redis, tag, 2)
    made = [event(f"{tag}-u", ids[k % 2], k) for k in range(4)]
    for e in made:
        redis.event_store().append(e)
    args = ("sessions", "copy", "--from", redis_url, "--to", target_url, "--match", f"{tag}-*",
            "--with-events", "--on-conflict", "skip", "--apply", "--yes", "-o", "json")
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    lost = [e.event_id for e in target.event_store().list_events(f"{tag}-u") if e.session_id == ids[1]]
    for event_id in lost:
        assert target.event_store().delete_event(event_id)
    resumed = invoke(*args)
    assert resumed.exit_code == 0, resumed.output
    doc = json.loads(resumed.stdout)
    assert doc["skipped"] == 2 and doc["events_restored"] == 2 and doc["events_skipped"] == 2
    assert doc["verified"]["mismatched"] == 0 and doc["verified"]["events_matched"] == 2
    have = target.event_store().list_events(f"{tag}-u")
    assert sorted((e.event_id, e.sequence) for e in have) == sorted(
        (e.event_id, e.sequence) for e in redis.event_store().list_events(f"{tag}-u"))
