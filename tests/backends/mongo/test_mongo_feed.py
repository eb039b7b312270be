"""The Mongo change feed (``backends.mongo.feed``): change streams on a replica set or
mongos, none on a standalone, and a lost stream never trusted.

No MongoDB server can run on our machines and mongomock has no change streams, so every
test with a feed runs on :class:`tests.support.change_streams.ChangeStreamClient`, a
test double of a change stream over mongomock (each test says so); the standalone tests
use plain mongomock, which our topology probe treats as a standalone.
"""

from __future__ import annotations

import uuid

import pytest

from tests.support.change_streams import ChangeStreamClient, history_lost
from tests.support.fixtures.mongo import LockedClient

from backends.contract import MemoryEvent
from backends.migrate import LiveMigration, cutover
from backends.mongo.schema import EVENTS_COLLECTION, STATE_COLLECTION
from tests.backends.migrate.test_live_migration import (
    OWNER,
    Writer,
    assert_identical,
    follow_until_quiet,
    open_state,
    seed,
    turn,
)


def _db() -> str:
    return f"feed_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def replica():
    """(adapter, client) on the change-stream test double, as a replica set."""
    from backends.mongo import MongoBackendAdapter

    client = ChangeStreamClient()
    adapter = MongoBackendAdapter(client=client, database=_db())
    yield adapter, client
    adapter.close()
    client.close()


def event(user, sid, text="x"):
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=text,
                       session_id=sid, owner_subject=OWNER)


def save(adapter, sid, blob=b"v1", expected=None):
    return adapter.state_store().save(sid, blob, expected_version=expected, owner_subject=OWNER)


def test_the_feed_names_sessions_written_and_deleted_and_users_whose_log_grew(replica):
    """On the change-stream test double (no real MongoDB here): a write made before the
    feed opened is not named; after it, every write, delete and event append is, once."""
    adapter, client = replica
    save(adapter, "before")
    feed = adapter.change_feed()
    assert feed is not None and feed.method == "change streams"
    save(adapter, "s-new")
    save(adapter, "before", b"v2", expected=1)
    adapter.commit_turn("s-turn", b"t1", expected_version=None, owner_subject=OWNER,
                        events=[event("u-1", "s-turn"), event("u-2", "s-turn")])
    adapter.event_store().append(event("u-3", "s-new"))
    adapter.state_store().delete("s-new")
    adapter.event_store().raise_counter("u-4", 9)  # a counter alone is no event in the log
    adapter.sync_items("s-turn", [])  # nor is another collection
    assert feed.drain() == ({"s-new", "before", "s-turn"}, {"u-1", "u-2", "u-3"})
    assert feed.drain() == (set(), set())
    feed.close()


def test_the_streams_watch_only_this_database_and_carry_no_blob(replica):
    """On the change-stream test double: writes to another database on the same client
    are not named, and what a state change hands out is its key, not the blob."""
    from backends.mongo import MongoBackendAdapter

    adapter, client = replica
    other = MongoBackendAdapter(client=client, database=_db())
    feed = adapter.change_feed()
    save(other, "elsewhere")
    other.event_store().append(event("u-other", "elsewhere"))
    save(adapter, "here", b"a large blob" * 100)
    assert feed.drain() == ({"here"}, set())
    watched = {coll for _db_, coll, _p, _k in client.changes.watched}
    assert watched == {STATE_COLLECTION, EVENTS_COLLECTION}
    assert all(k.get("max_await_time_ms") for *_x, k in client.changes.watched)  # never blocks
    state_stream = client.changes.streams[0]  # the feed opens the state stream first
    save(adapter, "here", b"v2", expected=1)
    assert "blob" in client.changes.events[-1][2]["updateDescription"]["updatedFields"]
    change = state_stream.try_next()
    assert change["operationType"] == "update" and change["documentKey"] == {"_id": "here"}
    assert "updateDescription" not in change
    feed.close()


@pytest.mark.parametrize("fault", ["history lost", "network", "invalidate"])
def test_a_lost_stream_answers_none_once_then_the_feed_works_again(replica, fault):
    """On the change-stream test double: the oplog rolled past the stream
    (ChangeStreamHistoryLost), a network error pymongo could not resume from, or the
    collection dropped (``invalidate``): the next drain is None, the streams are opened
    again, and the drain after names what was written since."""
    from pymongo.errors import AutoReconnect

    adapter, client = replica
    feed = adapter.change_feed()
    save(adapter, "s-1")
    if fault == "history lost":
        client.changes.lose_history()
    elif fault == "network":
        client.changes.fail_streams(AutoReconnect("connection reset by peer"))
    else:
        adapter.database[STATE_COLLECTION].drop()
    assert feed.drain() is None
    save(adapter, "s-2")
    adapter.event_store().append(event("u-1", "s-2"))
    assert feed.drain() == ({"s-2"}, {"u-1"})
    feed.close()
    assert not any(s.alive for s in client.changes.streams)


def test_streams_that_cannot_be_reopened_keep_the_feed_answering_none(replica):
    """On the change-stream test double: while ``watch`` is refused after a lost stream,
    every drain is None (a scan each time); once it opens, the feed names changes again."""
    from pymongo.errors import OperationFailure

    adapter, client = replica
    feed = adapter.change_feed()
    client.changes.lose_history()
    client.changes.refuse_watch = OperationFailure("not primary", code=10107)
    save(adapter, "s-1")
    assert feed.drain() is None
    assert feed.drain() is None
    client.changes.refuse_watch = None
    assert feed.drain() is None  # reopened now: what came before is not in it
    save(adapter, "s-2")
    assert feed.drain() == ({"s-2"}, set())
    feed.close()


def test_a_server_that_refuses_change_streams_has_the_feed_off():
    """On the change-stream test double: a replica set that refuses ``watch`` (no
    changeStream privilege, majority reads off) gives no feed."""
    from pymongo.errors import OperationFailure

    from backends.mongo import MongoBackendAdapter

    client = ChangeStreamClient()
    client.changes.refuse_watch = OperationFailure("not authorized", code=13)
    adapter = MongoBackendAdapter(client=client, database=_db())
    assert adapter.change_feed() is None


def test_a_mongos_streams_and_a_standalone_does_not():
    """On the change-stream test double answering ``hello`` as a mongos and as a
    standalone; and on plain mongomock, which cannot answer ``hello``: the feed is there
    only where the deployment streams."""
    from backends.mongo import MongoBackendAdapter

    mongos = MongoBackendAdapter(client=ChangeStreamClient({"msg": "isdbgrid"}), database=_db())
    standalone = MongoBackendAdapter(client=ChangeStreamClient({"isWritablePrimary": True}),
                                     database=_db())
    mongomock_adapter = MongoBackendAdapter(client=LockedClient(), database=_db())
    feed = mongos.change_feed()
    assert feed is not None and feed.method == "change streams"
    feed.close()
    assert standalone.change_feed() is None and mongomock_adapter.change_feed() is None


def test_a_migration_from_a_standalone_says_version_scan(tmp_path):
    """On plain mongomock (a standalone to our probe): no feed, so --follow scans."""
    from backends.mongo import MongoBackendAdapter

    source = MongoBackendAdapter(client=LockedClient(), database=_db())
    target = MongoBackendAdapter(client=LockedClient(), database=_db())
    seed(source, 2)
    mig = LiveMigration(source, target, open_state(tmp_path, source, target))
    assert mig.start_feed() == "version scan"
    mig.run_pass("bulk", all_users=True)
    turn(source, "live-1", b"moved", 1)
    again = mig.run_pass(use_feed=True)
    assert again.method.startswith("version scan") and again.copied == 1
    mig.close()


@pytest.fixture
def pair(tmp_path):
    """A Mongo source on the change-stream test double, a Mongo (mongomock) target."""
    from backends.mongo import MongoBackendAdapter

    client = ChangeStreamClient()
    source = MongoBackendAdapter(client=client, database=_db())
    writer_side = MongoBackendAdapter(client=client, database=source.settings.database)
    target = MongoBackendAdapter(client=LockedClient(), database=_db())
    mig = LiveMigration(source, target, open_state(tmp_path, source, target))
    yield source, writer_side, target, client, mig
    mig.close()
    for adapter in (source, writer_side, target):
        adapter.close()


def test_catch_up_passes_read_only_what_the_change_streams_named(pair):
    """On the change-stream test double (source) into mongomock (target): the feed opens
    before the bulk pass; a catch-up pass reads only the sessions and users it named
    (copies, a deletion, new events); a lost stream makes the next pass a full version
    scan that says why, and the pass after is fed again; the cutover finds both identical."""
    source, _, target, client, mig = pair
    seed(source, 6)
    assert mig.start_feed() == "change streams"
    bulk = mig.run_pass("bulk", all_users=True)
    assert bulk.method == "version scan" and bulk.copied == 6
    turn(source, "live-1", b"turn 2", 1, [event("user-1", "live-1", "new")])
    source.state_store().delete("live-2")
    fed = mig.run_pass(use_feed=True)
    assert fed.method == "change streams"
    assert (fed.scanned, fed.copied, fed.deleted, fed.events) == (1, 1, 1, 1)
    assert target.state_store().load_full("live-1").blob == b"turn 2"
    assert target.state_store().load_full("live-2") is None
    client.changes.lose_history()
    turn(source, "live-3", b"while the stream was lost", 1)
    fell_back = mig.run_pass(use_feed=True)
    assert fell_back.method == "version scan (the change feed may have lost messages)"
    assert fell_back.copied == 1 and fell_back.scanned == 5
    turn(source, "live-4", b"back on the feed", 1)
    again = mig.run_pass(use_feed=True)
    assert again.method == "change streams" and (again.scanned, again.copied) == (1, 1)
    result = cutover(mig, quiet_seconds=0)
    assert result.ok, (result.reason, result.report.differences)
    assert_identical(source, target)


def test_follow_with_a_writer_then_cutover_is_identical(pair):
    """On the change-stream test double (source) into mongomock (target): the suite's
    writer thread commits turns, adds sessions and deletes one while ``run_migration``
    follows on change streams; every catch-up pass is fed, and the cutover is identical."""
    source, writer_side, target, _, mig = pair
    versions = seed(source)
    writer = Writer(writer_side, versions)
    from backends.migrate import run_migration

    first = run_migration(mig)[0]
    assert first.copied == len(versions)
    writer.start()
    results = follow_until_quiet(mig, writer)
    assert writer.error is None
    assert results[0].method.startswith("version scan")  # a run's first pass is a full one
    fed = results[1:]
    assert fed and all(r.method == "change streams" for r in fed)
    assert sum(r.deleted for r in results) == 1 and not any(r.conflicts for r in results)
    result = cutover(mig, quiet_seconds=0.05)
    assert result.ok, (result.reason, result.report.differences)
    assert_identical(source, target)
