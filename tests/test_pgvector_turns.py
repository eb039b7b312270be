"""commit_turn atomicity, the event log and concurrency on a real PostgreSQL."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from backends.contract import BackendAdapter, EventStore, MemoryEvent
from backends.errors import InvalidEvent, StateVersionConflict

pytestmark = pytest.mark.postgres


@pytest.fixture
def adapter(pgvector_adapter_factory):
    return pgvector_adapter_factory()


def event(user: str, content: str = "said something", **kw) -> MemoryEvent:
    return MemoryEvent(event_id=f"e-{uuid.uuid4().hex}", user_id=user, content=content, **kw)


def test_adapter_satisfies_the_contract(adapter):
    assert isinstance(adapter, BackendAdapter)
    assert adapter.name == "pgvector" and adapter.is_persistent is True
    assert isinstance(adapter.event_store(), EventStore)
    assert adapter.event_store() is adapter.event_store()


def test_commit_turn_writes_state_and_events_together(adapter):
    events = [event("u1", "first", embedding=(0.1, 0.2), meta={"k": [1, "x"]}, owner_subject="acme",
                    session_id="s", source_event_id="src-1"),
              event("u1", "second")]
    assert adapter.commit_turn("s", b"state", expected_version=None, owner_subject="acme",
                               events=events) == 1
    assert adapter.state_store().load_full("s").owner_subject == "acme"
    listed = adapter.event_store().list_events("u1")
    assert [e.sequence for e in listed] == [1, 2]
    assert [e.content for e in listed] == ["first", "second"]
    first = listed[0]
    assert first.embedding == (0.1, 0.2)
    assert first.meta == {"k": [1, "x"]}
    assert first.owner_subject == "acme" and first.session_id == "s"
    assert first.source_event_id == "src-1"
    assert first.created_at == events[0].created_at and first.created_at.tzinfo is not None
    assert adapter.event_store().get_event(events[1].event_id).sequence == 2


def test_a_conflicting_turn_writes_no_event_and_leaves_no_sequence_gap(adapter):
    adapter.commit_turn("s", b"v1", expected_version=None, events=[event("u")])
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn("s", b"lost", expected_version=None, events=[event("u", "ghost")])
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn("s", b"stale", expected_version=7, events=[event("u", "ghost")])
    assert [e.content for e in adapter.event_store().list_events("u")] == ["said something"]
    adapter.commit_turn("s", b"v2", expected_version=1, events=[event("u", "next")])
    assert [e.sequence for e in adapter.event_store().list_events("u")] == [1, 2]
    assert adapter.state_store().load("s")[0] == b"v2"


def test_another_owners_turn_is_refused_whole(adapter):
    adapter.commit_turn("s", b"v1", expected_version=None, owner_subject="acme")
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn("s", b"x", expected_version=1, owner_subject="intruder",
                            events=[event("u")])
    assert adapter.event_store().list_events("u") == []
    assert adapter.state_store().load_full("s").version == 1


@pytest.mark.parametrize(
    "bad",
    [
        MemoryEvent(event_id="", user_id="u", content="x"),
        MemoryEvent(event_id="e", user_id="u", content="x", sequence=3),
        MemoryEvent(event_id="e", user_id="u", content="x", created_at=datetime(2020, 1, 1)),
        MemoryEvent(event_id="e", user_id="u", content="x", embedding=(float("nan"),)),
        MemoryEvent(event_id="e", user_id="u", content="x", meta={"x": object()}),
        "not an event",
    ],
)
def test_a_malformed_event_changes_nothing(adapter, bad):
    adapter.commit_turn("s", b"v1", expected_version=None, events=[event("u")])
    with pytest.raises(InvalidEvent):
        adapter.commit_turn("s", b"v2", expected_version=1, events=[event("u", "ok"), bad])
    assert adapter.state_store().load_full("s").version == 1
    assert len(adapter.event_store().list_events("u")) == 1


def test_duplicate_event_ids_are_refused_within_and_across_turns(adapter):
    e = event("u")
    with pytest.raises(InvalidEvent):
        adapter.commit_turn("s", b"v1", expected_version=None, events=[e, e])
    assert adapter.state_store().load("s") is None
    adapter.commit_turn("s", b"v1", expected_version=None, events=[e])
    with pytest.raises(InvalidEvent, match="already recorded"):
        adapter.commit_turn("s", b"v2", expected_version=1, events=[event("u"), e])
    assert adapter.state_store().load_full("s").version == 1
    assert [x.sequence for x in adapter.event_store().list_events("u")] == [1]
    # the counter rolled back too: the next event is 2, not 3
    assert adapter.event_store().append(event("u")).sequence == 2


def test_sequences_are_per_user(adapter):
    adapter.commit_turn("s", b"v1", expected_version=None,
                        events=[event("alice"), event("bob"), event("alice")])
    assert [e.sequence for e in adapter.event_store().list_events("alice")] == [1, 2]
    assert [e.sequence for e in adapter.event_store().list_events("bob")] == [1]


def test_list_events_order_paging_and_owner_filter(adapter):
    store = adapter.event_store()
    for i in range(6):
        store.append(event("u", f"c{i}", owner_subject="acme" if i % 2 else None))
    assert [e.content for e in store.list_events("u")] == [f"c{i}" for i in range(6)]
    assert [e.sequence for e in store.list_events("u", after_sequence=2, limit=2)] == [3, 4]
    assert [e.content for e in store.list_events("u", owner_subject="acme")] == ["c1", "c3", "c5"]
    assert [e.content for e in store.list_events("u", owner_subject=None)] == ["c0", "c2", "c4"]
    assert store.list_events("u", limit=0) == []


def test_delete_older_than_is_strict_and_sequences_are_not_reused(adapter):
    store = adapter.event_store()
    cutoff = datetime(2025, 1, 1, tzinfo=timezone.utc)
    store.append(event("u", "old", created_at=cutoff - timedelta(seconds=1)))
    store.append(event("u", "at", created_at=cutoff))
    store.append(event("v", "other user old", created_at=cutoff - timedelta(days=1)))
    assert store.delete_older_than(cutoff, user_id="u") == 1
    assert [e.content for e in store.list_events("u")] == ["at"]
    assert store.delete_older_than(cutoff) == 1
    assert store.append(event("u", "new")).sequence == 3


def test_eight_writers_racing_on_one_session(adapter):
    adapter.commit_turn("race", b"0", expected_version=None)
    per_writer = 6
    wins: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def writer(n: int) -> None:
        barrier.wait()
        done = 0
        while done < per_writer:
            state = adapter.state_store().load_full("race")
            try:
                version = adapter.commit_turn(
                    "race", f"w{n}".encode(), expected_version=state.version,
                    events=[event("racer", f"w{n}-{done}")],
                )
            except StateVersionConflict:
                continue
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
                return
            with lock:
                wins.append(version)
            done += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    total = 8 * per_writer
    assert sorted(wins) == list(range(2, total + 2))  # every version won exactly once
    assert adapter.state_store().current_version("race") == total + 1
    sequences = [e.sequence for e in adapter.event_store().list_events("racer")]
    assert sequences == list(range(1, total + 1))  # gap-free despite the lost races


def test_eight_writers_inserting_distinct_sessions_and_events(adapter):
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        barrier.wait()
        try:
            for i in range(5):
                adapter.commit_turn(f"w{n}-{i}", b"x", expected_version=None,
                                    events=[event("shared-user")])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert len(list(adapter.iter_sessions())) == 40
    assert [e.sequence for e in adapter.event_store().list_events("shared-user")] == list(range(1, 41))


def test_first_writes_race_on_table_creation(pgvector_adapter_factory):
    adapters = [pgvector_adapter_factory() for _ in range(4)]
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def first_write(n: int) -> None:
        barrier.wait()
        try:
            adapters[n].commit_turn(f"first-{n}", b"x", expected_version=None, events=[event("u")])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=first_write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors


def test_health(adapter, postgres_server):
    from backends.pgvector import PgVectorAdapter

    assert adapter.check_health() is True
    dead = PgVectorAdapter("postgresql://postgres:secret@127.0.0.1:1/x", dimensions=8,
                           connect_timeout=1)
    try:
        assert dead.check_health(timeout=1) is False
        details = dead.health_details(1.0)
        assert details["reachable"] is False and "secret" not in repr(details)
    finally:
        dead.close()
    details = adapter.health_details(2.0)
    assert details["reachable"] is True
    assert details["extension_present"] is True
    assert details["pgvector_version"].startswith("0.8")
    assert details["server_version"]
    # the suite's own server trades durability for speed, and health says so
    risky = [f"{k}=off" for k, v in sorted(details["settings"].items()) if v == "off"]
    assert details["durable"] is (not risky)
    assert all(r in details["durability_reason"] for r in risky)


def test_unreachable_server_maps_to_backend_unreachable_without_credentials():
    from backends.errors import BackendUnreachable
    from backends.pgvector import PgVectorAdapter

    adapter = PgVectorAdapter("postgresql://bob:hunter2@127.0.0.1:1/x", dimensions=8,
                              connect_timeout=1)
    try:
        with pytest.raises(BackendUnreachable) as info:
            adapter.state_store().load("s")
        assert "hunter2" not in str(info.value)
        assert isinstance(info.value.__cause__, Exception)
    finally:
        adapter.close()
        adapter.close()  # idempotent


def test_closed_adapter_refuses_work(pgvector_adapter_factory):
    from backends.errors import BackendUnreachable

    adapter = pgvector_adapter_factory()
    adapter.close()
    with pytest.raises(BackendUnreachable):
        adapter.state_store().load("s")
    assert adapter.check_health() is False
