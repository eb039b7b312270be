"""Concurrent writers with retries against each backend, then the loss audit.

Real Redis and PostgreSQL+pgvector (the suite's private servers); MongoDB only through
``mongomock`` (no real server here), state-only there because the fake has no
transactions for the event path. Durations are short: figures come from
``bench/bench_load.py``, these tests assert only that nothing was lost.
"""

from __future__ import annotations

import threading

import pytest

from backends.ops.loadtest import LoadPlan, run_load

DURATION_S = 1.5


def assert_clean_run(report, *, expect_events: bool) -> None:
    assert report.fatal is None, report.fatal
    assert report.verification.ok, report.verification.problems
    assert report.commits > 0
    assert report.verification.acknowledged_verified == report.commits
    assert report.unknown == 0 and not report.errors, report.errors
    assert report.cleanup_problems == []
    if expect_events:
        assert report.verification.events_checked == report.commits * report.events_per_turn
    assert sum(report.verification.final_versions.values()) == report.commits


def test_redis_writers_lose_nothing(redis_url, redis_server):
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(redis_url) as adapter:
        report = run_load(adapter, LoadPlan(writers=4, duration_s=DURATION_S, sessions=2,
                                            events_per_turn=2))
    assert_clean_run(report, expect_events=True)
    assert report.conflicts > 0  # four writers on two sessions must race
    with redis_server.client() as client:  # everything the run wrote is gone again
        assert list(client.scan_iter(match=f"*{report.prefix}*")) == []


def test_pgvector_writers_lose_nothing(pgvector_adapter_factory):
    adapter = pgvector_adapter_factory(pool_size=4)
    report = run_load(adapter, LoadPlan(writers=4, duration_s=DURATION_S, sessions=2,
                                        events_per_turn=2))
    assert_clean_run(report, expect_events=True)
    assert report.conflicts > 0


def test_memory_writers_lose_nothing():
    from backends.memory import MemoryBackendAdapter

    report = run_load(MemoryBackendAdapter(), LoadPlan(writers=4, duration_s=0.5, sessions=3))
    assert_clean_run(report, expect_events=False)
    assert report.events_per_turn == 0 and report.notes  # says why there are no events


_ATOMIC_ON_A_SERVER = ("find_one_and_replace", "insert_one", "find_one", "delete_one",
                       "find", "count_documents", "update_one", "replace_one")


def test_mongomock_state_only_writers_lose_nothing(monkeypatch):
    """mongomock (a fake, in-process): state compare-and-set only.

    A MongoDB server applies each single-document operation atomically; mongomock does
    not (its find_one_and_replace is a Python read-modify-write, and this very audit
    reports lost updates on it). The test restores that one server property with a lock
    around the fake's collection methods, and nothing else.
    """
    mongomock = pytest.importorskip("mongomock")
    from backends.mongo import MongoBackendAdapter

    lock = threading.RLock()
    Collection = mongomock.collection.Collection

    def atomic(method):
        def call(self, *args, **kwargs):
            with lock:
                return method(self, *args, **kwargs)
        return call

    for name in _ATOMIC_ON_A_SERVER:
        monkeypatch.setattr(Collection, name, atomic(getattr(Collection, name)))

    client = mongomock.MongoClient()
    adapter = MongoBackendAdapter(client=client, database="semvec_load")
    report = run_load(adapter, LoadPlan(writers=3, duration_s=0.5, sessions=2,
                                        events_per_turn=0))
    assert_clean_run(report, expect_events=False)
    assert client["semvec_load"]["semvec_session_state"].count_documents({}) == 0


def test_commit_count_is_an_exact_bound(redis_url):
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(redis_url) as adapter:
        report = run_load(adapter, LoadPlan(writers=4, duration_s=600, max_commits=25,
                                            sessions=2, events_per_turn=1))
    assert report.commits == 25
    assert report.elapsed_s < 300  # stopped by the count, not the (600 s) duration
    assert report.verification.ok, report.verification.problems


def test_events_refused_up_front_stop_the_run():
    """A backend that refuses every turn (e.g. a cluster) ends the run as fatal, quickly."""
    from backends.errors import UnsupportedOperation
    from backends.memory import MemoryBackendAdapter

    class NoTurns(MemoryBackendAdapter):
        def commit_turn(self, *args, **kwargs):
            raise UnsupportedOperation("turns are not supported here")

    report = run_load(NoTurns(), LoadPlan(writers=2, duration_s=600))
    assert report.fatal and "unsupported" in report.fatal
    assert report.commits == 0 and report.elapsed_s < 300  # not the (600 s) duration
    assert report.verification.ok


def test_audit_catches_a_lost_acknowledged_commit():
    """The audit is not vacuous: a store that forgets an acknowledged write fails it."""
    from backends.memory import MemoryBackendAdapter

    class Forgetful(MemoryBackendAdapter):
        lock = threading.Lock()
        dropped = False

        def commit_turn(self, session_id, blob, *, expected_version, **kwargs):
            with self.lock:
                if expected_version == 3 and not Forgetful.dropped:
                    Forgetful.dropped = True
                    return 4  # acknowledged, never written
            return super().commit_turn(session_id, blob, expected_version=expected_version,
                                       **kwargs)

    report = run_load(Forgetful(), LoadPlan(writers=1, duration_s=0.3, sessions=1, seed=1))
    assert not report.verification.ok
    assert any("acknowledged twice" in p or "missing" in p
               for p in report.verification.problems), report.verification.problems


def test_plan_rejects_nonsense():
    with pytest.raises(ValueError):
        LoadPlan(writers=0)
    with pytest.raises(ValueError):
        LoadPlan(duration_s=0)
    with pytest.raises(ValueError):
        LoadPlan(events_per_turn=-1)
