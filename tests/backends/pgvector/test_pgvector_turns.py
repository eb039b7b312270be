"""commit_turn atomicity, the event log and concurrency on a real PostgreSQL, for both
SQL backends (``postgres`` and ``pgvector`` share the engine's state and event tables).

Updated for the engine's SQL layout (issue 13): event ids are UUIDs, events carry no
sequence (the layout has no column for it; ``assigns_sequences`` is False) and are
listed newest first, unowned events read back as ``""``. The old sequence assertions
became assertions on that behaviour."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from backends.contract import BackendAdapter, EventStore, MemoryEvent
from backends.errors import InvalidEvent, StateVersionConflict

pytestmark = pytest.mark.postgres


@pytest.fixture
def adapter(sql_adapter_factory):
    return sql_adapter_factory()


def event(user: str, content: str = "said something", **kw) -> MemoryEvent:
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=content, **kw)


def contents(events) -> list[str]:
    return [e.content for e in events]


def test_adapter_satisfies_the_contract(adapter):
    assert isinstance(adapter, BackendAdapter)
    assert adapter.name in ("postgres", "pgvector") and adapter.is_persistent is True
    assert isinstance(adapter.event_store(), EventStore)
    assert adapter.event_store() is adapter.event_store()
    assert adapter.event_store().assigns_sequences is False


def test_commit_turn_writes_state_and_events_together(adapter):
    source = str(uuid.uuid4())
    now = datetime.now(timezone.utc)
    events = [event("u1", "first", embedding=(0.1, 0.2), meta={"k": [1, "x"]}, owner_subject="acme",
                    session_id="s", source_event_id=source, created_at=now - timedelta(seconds=1)),
              event("u1", "second", created_at=now)]
    assert adapter.commit_turn("s", b"state", expected_version=None, owner_subject="acme",
                               events=events) == 1
    assert adapter.state_store().load_full("s").owner_subject == "acme"
    listed = adapter.event_store().list_events("u1")
    assert contents(listed) == ["second", "first"]  # newest first, as the engine lists SQL
    assert [e.sequence for e in listed] == [0, 0]
    first = listed[1]
    assert first.embedding == (0.1, 0.2)
    assert first.meta == {"k": [1, "x"]}
    assert first.owner_subject == "acme" and first.session_id == "s"
    assert first.source_event_id == source
    assert first.created_at == events[0].created_at and first.created_at.tzinfo is not None
    second = adapter.event_store().get_event(events[1].event_id)
    assert second.owner_subject == "" and second.session_id == "" and second.embedding == ()


def test_a_conflicting_turn_writes_no_event(adapter):
    adapter.commit_turn("s", b"v1", expected_version=None, events=[event("u")])
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn("s", b"lost", expected_version=None, events=[event("u", "ghost")])
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn("s", b"stale", expected_version=7, events=[event("u", "ghost")])
    assert contents(adapter.event_store().list_events("u")) == ["said something"]
    adapter.commit_turn("s", b"v2", expected_version=1, events=[event("u", "next")])
    assert sorted(contents(adapter.event_store().list_events("u"))) == ["next", "said something"]
    assert adapter.state_store().load("s") == (b"v2", 2)


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
        MemoryEvent(event_id="e-not-a-uuid", user_id="u", content="x"),
        MemoryEvent(event_id=str(uuid.uuid4()), user_id="u", content="x",
                    source_event_id="src-1"),
        MemoryEvent(event_id=str(uuid.uuid4()), user_id="u", content="x", sequence=3),
        MemoryEvent(event_id=str(uuid.uuid4()), user_id="u", content="x",
                    created_at=datetime(2020, 1, 1)),
        MemoryEvent(event_id=str(uuid.uuid4()), user_id="u", content="x",
                    embedding=(float("nan"),)),
        MemoryEvent(event_id=str(uuid.uuid4()), user_id="u", content="x", meta={"x": object()}),
        MemoryEvent(event_id=str(uuid.uuid4()), user_id="u", content="x", session_id="s" * 65),
        MemoryEvent(event_id=str(uuid.uuid4()), user_id="u" * 129, content="x"),
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
    assert [x.event_id for x in adapter.event_store().list_events("u")] == [e.event_id]


def test_events_are_per_user(adapter):
    adapter.commit_turn("s", b"v1", expected_version=None,
                        events=[event("alice"), event("bob"), event("alice")])
    assert len(adapter.event_store().list_events("alice")) == 2
    assert adapter.event_store().count_for_user("alice") == 2
    assert len(adapter.event_store().list_events("bob")) == 1
    assert adapter.event_store().session_subjects("s") == []  # events named no session


def test_list_events_order_limit_and_owner_filter(adapter):
    store = adapter.event_store()
    base = datetime(2025, 6, 1, tzinfo=timezone.utc)
    for i in range(6):
        store.append(event("u", f"c{i}", owner_subject="acme" if i % 2 else None,
                           created_at=base + timedelta(seconds=i)))
    assert contents(store.list_events("u")) == [f"c{i}" for i in reversed(range(6))]
    assert contents(store.list_events("u", limit=2)) == ["c5", "c4"]
    # the owner filter applies before the limit
    assert contents(store.list_events("u", owner_subject="acme", limit=2)) == ["c5", "c3"]
    assert contents(store.list_events("u", owner_subject=None)) == ["c4", "c2", "c0"]
    assert store.list_events("u", limit=0) == []
    assert store.list_events("u", after_sequence=1) == []  # no event has a sequence


def test_get_event_applies_the_owner_filter(adapter):
    store = adapter.event_store()
    owned, unowned = event("u", owner_subject="acme"), event("u")
    store.append(owned)
    store.append(unowned)
    assert store.get_event(owned.event_id, owner_subject="acme").content == "said something"
    assert store.get_event(owned.event_id, owner_subject="other") is None
    assert store.get_event(owned.event_id, owner_subject=None) is None
    assert store.get_event(unowned.event_id, owner_subject=None).event_id == unowned.event_id
    assert store.get_event(unowned.event_id, owner_subject="acme") is None
    assert store.get(uuid.UUID(owned.event_id)).event_id == owned.event_id


def test_delete_older_than_is_strict_in_both_spellings(adapter):
    store = adapter.event_store()
    cutoff = datetime(2025, 1, 1, tzinfo=timezone.utc)
    store.append(event("u", "old", created_at=cutoff - timedelta(seconds=1)))
    store.append(event("u", "at", created_at=cutoff))
    store.append(event("v", "other user old", created_at=cutoff - timedelta(days=1)))
    assert store.delete_older_than("u", cutoff) == 1  # the engine's spelling
    assert contents(store.list_events("u")) == ["at"]
    assert store.delete_older_than(cutoff) == 1
    assert store.append(event("u", "new")).sequence == 0
    assert store.delete_by_user("u") == 2 and store.list_by_user("u") == []


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
    landed = sorted(contents(adapter.event_store().list_events("racer")))
    # exactly the winning turns' events: a lost race left nothing behind
    assert landed == sorted(f"w{n}-{i}" for n in range(8) for i in range(per_writer))


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
    assert adapter.event_store().count_for_user("shared-user") == 40


def test_first_writes_race_on_table_creation(sql_adapter_factory):
    adapters = [sql_adapter_factory() for _ in range(4)]
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


def test_health(pgvector_adapter_factory, postgres_server):
    from backends.pgvector import PgVectorAdapter

    adapter = pgvector_adapter_factory()
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


def test_closed_adapter_refuses_work(sql_adapter_factory):
    from backends.errors import BackendUnreachable

    adapter = sql_adapter_factory()
    adapter.close()
    with pytest.raises(BackendUnreachable):
        adapter.state_store().load("s")
    assert adapter.check_health() is False


@pytest.mark.parametrize("point", ["turn.after_state", "turn.cut_connection"])
def test_a_turn_failing_between_state_and_events_leaves_nothing(adapter, point):
    from backends.contract import FaultSeam
    from backends.errors import BackendError, InjectedFault

    assert isinstance(adapter, FaultSeam) and point in adapter.fault_points
    adapter.commit_turn("s", b"v1", expected_version=None, events=[event("u", "kept")])
    expected_error = InjectedFault if point == "turn.after_state" else BackendError
    with adapter.inject_fault(point):
        with pytest.raises(expected_error) as info:
            adapter.commit_turn("s", b"v2", expected_version=1, owner_subject="acme",
                                events=[event("u", "lost"), event("w", "lost")])
    if point == "turn.cut_connection":
        assert info.value.__cause__ is not None  # the driver's error is kept
    assert adapter.state_store().load_full("s") == (b"v1", 1, None, None)
    assert contents(adapter.event_store().list_events("u")) == ["kept"]
    assert adapter.event_store().list_events("w") == []
    # the seam disarms itself, and the adapter still works (a fresh connection)
    assert adapter.commit_turn("s", b"v2", expected_version=1, events=[event("u", "after")]) == 2


def test_an_unknown_fault_point_is_refused(adapter):
    with pytest.raises(ValueError, match="unknown fault point"):
        with adapter.inject_fault("turn.nowhere"):
            pass


@pytest.mark.parametrize("sqlstate,category", [
    ("40001", "BackendTransient"), ("40P01", "BackendTransient"), ("55P03", "BackendTransient"),
    ("57P01", "BackendTransient"), ("28P01", "BackendAuthError"), ("42501", "BackendAuthError"),
    ("08006", "BackendUnreachable"), ("3D000", "BackendConfigError"),
    ("42703", "BackendConfigError"),
])
def test_driver_errors_map_to_categories(sqlstate, category):
    import psycopg

    import backends.errors as errors
    from backends.postgres.errors import translate_error

    cls = psycopg.errors.lookup(sqlstate)
    mapped = translate_error(cls("boom"), "postgresql://h/db", action="a query")
    assert type(mapped).__name__ == category and isinstance(mapped, errors.BackendError)


def test_a_statement_timeout_on_a_locked_row_reaches_the_caller_as_transient(adapter, pgvector_url):
    """A real lock timeout, not a constructed one: another session holds the row."""
    import psycopg

    from backends.errors import BackendTransient

    adapter.state_store().save("s", b"v1", expected_version=None)
    with psycopg.connect(pgvector_url) as holder:
        holder.execute("SELECT 1 FROM semvec_session_state WHERE session_id = 's' FOR UPDATE")
        slow = type(adapter)(pgvector_url, statement_timeout_ms=300)
        try:
            with pytest.raises(BackendTransient) as info:
                slow.state_store().save("s", b"v2", expected_version=1)
            assert info.value.__cause__ is not None
        finally:
            slow.close()
    assert adapter.state_store().load("s") == (b"v1", 1)


def test_a_malformed_conninfo_is_a_config_error():
    from backends.errors import BackendConfigError
    from backends.postgres import PostgresAdapter

    adapter = PostgresAdapter("postgresql://u:pw@127.0.0.1:1/x?no_such_option=1")
    try:
        with pytest.raises(BackendConfigError) as info:
            adapter.state_store().load("s")
        assert "pw" not in str(info.value).replace("no_such_option", "")
    finally:
        adapter.close()
