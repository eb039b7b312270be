"""``wait_replicas=N`` / ``wait_timeout_ms=M``: every state write and turn is followed by
WAIT, and fewer than N replicas within M is NotReplicated (its own category), never a
success; an identical retry once the replica is back is idempotent. Real servers on
loopback: a primary and a replica."""

from __future__ import annotations

import pytest

from backends.errors import BackendConfigError, Category, NotReplicated, category_of
from backends.redis import RedisBackendAdapter
from backends.redis.config import RedisSettings
from tests.support.dedicated_redis import DedicatedRedis, start_replica


def test_the_uri_parameters_are_read_and_removed():
    got = RedisSettings.resolve("redis://h:1/0?wait_replicas=2&wait_timeout_ms=250", {})
    assert (got.wait_replicas, got.wait_timeout_ms) == (2, 250)
    assert "wait" not in got.url
    assert RedisSettings.resolve("redis://h:1/0", {}).wait_replicas == 0


def test_an_option_beats_the_uri():
    got = RedisSettings.resolve("redis://h:1/0?wait_replicas=2", {"wait_replicas": 1})
    assert got.wait_replicas == 1


def test_a_sentinel_uri_takes_them_too():
    got = RedisSettings.resolve("redis+sentinel://h:26379/svc/0?wait_replicas=1", {})
    assert got.wait_replicas == 1 and got.sentinel is not None


@pytest.mark.parametrize("uri, options, words", [
    ("redis://h:1/0?wait_replicas=-1", {}, "wait_replicas"),
    ("redis://h:1/0?wait_replicas=x", {}, "wait_replicas"),
    ("redis://h:1/0?wait_timeout_ms=0", {}, "wait_timeout_ms"),
    ("redis://h:1/0", {"wait_replicas": True}, "wait_replicas"),
    ("redis://h:1/0?wait_replicas=1&wait_timeout_ms=9000", {}, "below socket_timeout"),
    ("redis://h:1/0?cluster=true&wait_replicas=1", {}, "Cluster"),
])
def test_bad_values_are_refused_naming_them(uri, options, words):
    with pytest.raises(BackendConfigError, match=words):
        RedisSettings.resolve(uri, options)


@pytest.fixture
def pair(tmp_path):
    primary = DedicatedRedis(tmp_path / "primary", extra=["--appendonly", "no"])
    primary.start()
    replica = None
    try:
        replica = start_replica(primary, tmp_path / "replica")
        yield primary, replica
    finally:
        if replica is not None:
            replica.kill()
        primary.kill()


@pytest.mark.redis
def test_writes_wait_for_the_replica_and_a_short_count_is_its_own_error(pair):
    primary, replica = pair
    adapter = RedisBackendAdapter(primary.url + "?wait_replicas=1&wait_timeout_ms=300")
    try:
        store = adapter.state_store()
        assert adapter.commit_turn("t", b"a", expected_version=None) == 1
        assert store.save("s", b"a", expected_version=None) == 1
        with replica.client() as copy:  # acknowledged = on the replica already
            assert copy.hget("semvec:state:t", "version") == b"1"
            assert copy.hget("semvec:state:s", "version") == b"1"
        replica.kill()
        for write in (lambda: adapter.commit_turn("t", b"b", expected_version=1),
                      lambda: store.save("s", b"b", expected_version=1),
                      lambda: adapter.commit_turn("t", b"b", expected_version=1,
                                                  events=[_event("t")])):
            with pytest.raises(NotReplicated, match="0 of the 1 replica"):
                write()
        assert category_of(NotReplicated("x")) is Category.UNREPLICATED
        # the write stands on the primary: once the replica is back and has it, an
        # identical retry returns its version
        replica.start()
        with replica.client() as copy:
            _until(lambda: copy.hget("semvec:state:t", "blob") == b"b")
        assert _retried(lambda: adapter.commit_turn("t", b"b", expected_version=1)) == 2
    finally:
        adapter.close()


@pytest.mark.redis
def test_without_wait_replicas_nothing_waits(pair):
    primary, replica = pair
    adapter = RedisBackendAdapter(primary.url)
    try:
        replica.kill()
        assert adapter.commit_turn("t", b"a", expected_version=None) == 1
    finally:
        adapter.close()


def _until(check) -> None:
    import time

    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, "the replica did not catch up"
        time.sleep(0.05)


def _retried(write):
    """``write`` again while the replica has not confirmed (its first ack after a resync
    may take a second), bounded."""
    import time

    deadline = time.monotonic() + 30
    while True:
        try:
            return write()
        except NotReplicated:
            assert time.monotonic() < deadline, "the replica never confirmed"
            time.sleep(0.1)


def _event(sid: str):
    from backends.conformance.children import turn_event

    return turn_event("u-wait", sid, None, "e1")
