"""Archive v2 between the shipped stores (#12 item 4): sessions, drift flags, expiry,
events and counters, Redis <-> PostgreSQL+pgvector <-> MongoDB.

Redis and PostgreSQL are the suite's real servers; MongoDB is ``mongomock`` (no real
MongoDB on our machines). Nothing here is skipped when a store lacks a seam the archive
uses: ``test_each_store_offers_the_seams_archive_v2_uses`` fails and names it, and the
round trip fails where the seam is needed. What a target legitimately cannot keep
(pgvector keeps no event sequence numbers, Mongo no drift flags or per-session expiry)
must be refused by the loss rule first, then imported with ``allow_loss``.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from backends.contract import Capability, EventRestorer, MemoryEvent
from backends.transfer import ArchiveFile, LossyTransfer, SessionImporter, export_to_path
from backends.transfer.loss import keeps_expiry, keeps_sequences, state_store_member
from semvecctl.app import app
from tests.support import transfer_doubles

mongomock = pytest.importorskip("mongomock")
import tests.support.fixtures.mongo  # noqa: E402,F401 - mongomock compatibility shims

DIMS = 8
UTC = timezone.utc
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
runner = CliRunner()


@pytest.fixture
def redis(redis_url):
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(redis_url)
    yield adapter
    adapter.close()


@pytest.fixture
def pgvector(pgvector_adapter_factory):
    return pgvector_adapter_factory(dimensions=DIMS)


def _mongo_adapter():
    from backends.mongo import MongoBackendAdapter

    client = mongomock.MongoClient()
    return client, MongoBackendAdapter(client=client, database=f"t_{uuid.uuid4().hex[:10]}",
                                       item_sync=True)


@pytest.fixture
def mongo():
    client, adapter = _mongo_adapter()
    yield adapter
    adapter.close()
    client.close()


@pytest.fixture
def mongo2():
    client, adapter = _mongo_adapter()
    yield adapter
    adapter.close()
    client.close()


#: the seams archive v2 needs from each store, as ENGINE-WIRE and the stores' designs say
#: they have them (a missing one is a failure here, never a skip)
SEAMS = {
    "redis": {"session_subjects", "restore_events", "drift_exempt", "expiry", "sequences"},
    "mongo": {"session_subjects", "restore_events", "sequences"},
    "pgvector": {"session_subjects", "drift_exempt", "append"},
}


def seams_of(adapter) -> set[str]:
    log = adapter.event_store()
    found = set()
    if log is not None and callable(getattr(log, "session_subjects", None)):
        found.add("session_subjects")
    if isinstance(log, EventRestorer):
        found.add("restore_events")
    if log is not None and callable(getattr(log, "append", None)):
        found.add("append")
    if log is not None and keeps_sequences(log):
        found.add("sequences")
    if (state_store_member(adapter, Capability.DRIFT_EXEMPT) is not None
            and state_store_member(adapter, Capability.DRIFT_STATUS) is not None):
        found.add("drift_exempt")
    if keeps_expiry(adapter):
        found.add("expiry")
    return found


@pytest.mark.parametrize("name", sorted(SEAMS))
def test_each_store_offers_the_seams_archive_v2_uses(request, name):
    adapter = request.getfixturevalue(name)
    missing = SEAMS[name] - seams_of(adapter)
    assert not missing, f"backend {name!r} lacks {sorted(missing)}, which archive v2 transfers use"


# -- data --------------------------------------------------------------------------------------


def event(user: str, session: str, n: int, owner: str = "acme") -> MemoryEvent:
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=f"said {n} ✓",
                       created_at=T0 + timedelta(minutes=n), embedding=(0.5, -0.25, n / 8),
                       meta={"turn": n}, owner_subject=owner, session_id=session,
                       source_event_id=str(uuid.uuid4()) if n % 2 else None)


def seed(adapter, tag: str) -> dict:
    """Three sessions (s2 drift exempt where the store keeps the flag, s3 unowned and
    expiring where the store keeps expiry) and two users, alice with events in all three;
    her last event (of no session) is deleted, so where the store keeps a counter it
    stays above her highest event."""
    store, log = adapter.state_store(), adapter.event_store()
    n = {k: f"{tag}-{k}" for k in ("alice", "bob", "s1", "s2", "s3")}
    store.save(n["s1"], b"one", expected_version=None, owner_subject="acme")
    log.append(event(n["alice"], n["s1"], 1))
    log.append(event(n["bob"], n["s1"], 2))
    store.save(n["s1"], bytes(range(256)), expected_version=1, owner_subject="acme",
               pending_message="ok?")
    log.append(event(n["alice"], n["s1"], 3))
    store.save(n["s2"], b'{"turns": [1]}', expected_version=None, owner_subject="acme")
    log.append(event(n["alice"], n["s2"], 4))
    if "drift_exempt" in seams_of(adapter):
        state_store_member(adapter, Capability.DRIFT_EXEMPT)(n["s2"], True)
    if "expiry" in seams_of(adapter):
        adapter.restore_session(n["s3"], b"", version=1, ttl_seconds=3600)
    else:
        store.save(n["s3"], b"", expected_version=None)
    log.append(event(n["alice"], n["s3"], 5, owner=""))
    gone = log.append(event(n["alice"], "", 6, owner=""))
    assert log.delete(gone.event_id)
    return n


def content_of(adapter, user: str) -> list[tuple]:
    """A user's events without their numbers, in a stable order."""
    return sorted((e.event_id, e.session_id, e.content, e.owner_subject, dict(e.meta),
                   e.source_event_id, tuple(round(x, 5) for x in e.embedding),
                   e.created_at.astimezone(UTC).replace(microsecond=0))
                  for e in adapter.event_store().list_events(user))


def expected_losses(source, target) -> list[str]:
    """The loss rule's names for what ``target`` cannot keep of what ``seed`` put in ``source``."""
    have, keep = seams_of(source), seams_of(target)
    losses = []
    if "expiry" in have and "expiry" not in keep:
        losses.append("1 session expiry time(s)")
    if "drift_exempt" in have and "drift_exempt" not in keep:
        losses.append("1 drift-exempt flag(s)")
    if "sequences" in have and "sequences" not in keep:
        losses.append("5 event sequence number(s)")
    return losses


PAIRS = [("redis", "pgvector"), ("pgvector", "mongo"), ("mongo", "redis"),
         ("redis", "mongo"), ("mongo", "pgvector"), ("pgvector", "redis"), ("mongo", "mongo2")]


@pytest.mark.parametrize("source_name,target_name", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_archive_v2_round_trip_with_events_and_counters(request, tmp_path, source_name, target_name):
    source = request.getfixturevalue(source_name)
    target = request.getfixturevalue(target_name)
    tag = uuid.uuid4().hex[:8]
    n = seed(source, tag)
    path = tmp_path / "a.jsonl.gz"
    exported = export_to_path(source, path, source_uri=source_name, match=f"{tag}-*",
                              with_events=True, users=[n["alice"]])
    assert (exported.count, exported.users, exported.events) == (3, 1, 5), exported

    losses = expected_losses(source, target)
    if losses:  # refused first, naming each loss, nothing written
        with pytest.raises(LossyTransfer) as info:
            SessionImporter(target, ArchiveFile(path)).apply()
        for loss in losses:
            assert loss in str(info.value)
        assert list(target.iter_sessions(match=f"{tag}-*")) == []
    importer = SessionImporter(target, ArchiveFile(path), allow_loss=bool(losses))
    result = importer.apply()
    assert (result.created, result.expired, result.events_restored) == (3, 0, 5)
    report = importer.verify_target()
    assert report.ok and report.matched == 3 and report.events_matched == 5, report.examples

    src, dst = source.state_store(), target.state_store()
    for sid in (n["s1"], n["s2"], n["s3"]):
        a, b = src.load_full(sid), dst.load_full(sid)
        assert (b.blob, b.version, b.owner_subject, b.pending_message) == \
            (a.blob, a.version, a.owner_subject, a.pending_message), sid
    both = seams_of(source) & seams_of(target)
    if "drift_exempt" in both:
        assert dst.is_drift_exempt(n["s2"]) and not dst.is_drift_exempt(n["s1"])
    if "expiry" in both:
        assert 3500 <= target.describe_session(n["s3"]).ttl_seconds <= 3600
    for user in (n["alice"], n["bob"]):
        assert content_of(target, user) == content_of(source, user), user

    log = target.event_store()
    if "sequences" in both:  # same numbers, and the sequence goes on after the counter
        for user in (n["alice"], n["bob"]):
            assert [e.sequence for e in log.list_events(user)] == \
                [e.sequence for e in source.event_store().list_events(user)]
        assert log.append(event(n["alice"], "", 9)).sequence == 6
        assert log.append(event(n["bob"], "", 9)).sequence == 2
    elif "sequences" in seams_of(target):  # the source had no numbers: the target assigns them
        assert sorted(e.sequence for e in log.list_events(n["alice"])) == [1, 2, 3, 4]
        assert log.append(event(n["alice"], "", 9)).sequence == 5

    # importing again leaves everything as it is
    again = SessionImporter(target, ArchiveFile(path), on_conflict="skip", allow_loss=bool(losses))
    twice = again.apply()
    assert (twice.created, twice.skipped, twice.events_restored, twice.events_skipped) == (0, 3, 0, 5)


def test_v1_archives_still_import_into_redis(redis, tmp_path):
    from tests.backends.archive.test_v2 import V1_ARCHIVE

    path = tmp_path / "old.jsonl"
    path.write_bytes(V1_ARCHIVE)
    for sid in ("v1-plain", "v1-expired", "v1-ttl-long", "v1-items"):
        redis.state_store().delete(sid)
    importer = SessionImporter(redis, ArchiveFile(path), allow_loss=True)  # redis keeps no items
    result = importer.apply()
    assert (result.created, result.expired, result.items_not_imported) == (3, 1, 1)
    assert importer.verify_target().ok
    assert redis.describe_session("v1-ttl-long").ttl_seconds > 300_000_000
    assert redis.state_store().load_full("v1-plain").version == 3


def test_cli_copy_redis_to_mongomock_with_events_and_a_whole_user(redis, redis_url):
    from backends.mongo import MongoBackendAdapter

    client = mongomock.MongoClient()
    transfer_doubles.MONGO.update(client=client, database=f"t_{uuid.uuid4().hex[:10]}")
    tag = uuid.uuid4().hex[:8]
    n = seed(redis, tag)
    args = ("sessions", "copy", "--from", redis_url, "--to-adapter", "tests.support.transfer_doubles:mongo_shared",
            "--match", f"{tag}-*", "--with-events", "--user", n["alice"], "--apply", "--yes")
    refused = runner.invoke(app, list(args))
    assert refused.exit_code == 1, refused.output
    assert "1 drift-exempt flag(s) (backend 'mongo' cannot store drift flags)" in refused.stderr
    copied = runner.invoke(app, [*args, "--allow-loss", "-o", "json"])
    assert copied.exit_code == 0, copied.output
    assert '"events_restored": 5' in copied.stdout and f'"{n["alice"]}": 5' in copied.stdout
    target = MongoBackendAdapter(client=client, database=transfer_doubles.MONGO["database"])
    assert target.event_store().append(event(n["alice"], "", 9)).sequence == 6
    client.close()
