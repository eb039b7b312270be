"""The SQL event store's one sorted pass (``events_by_session``), which an export of a
whole store reads instead of querying by user: every session's events as the plain
definition reads them (the session's users, each one's events of that session, by user
then ``log_order``), sessions in the listing's code-point order, under each owner filter,
over one database and over shards (a misplaced copy left out, an out-of-turn event on the
primary kept). An export takes the same records this way as the per-user way, keeps
them right when a listing comes out of order, and closes the pass's connection when it
stops early. On the suite's real PostgreSQL."""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from backends.archive.format import log_order
from backends.contract import UNSCOPED, MemoryEvent
from backends.transfer.export import ExportResult, _StreamedEvents, iter_records
import backends.transfer.export as export_module

pytestmark = pytest.mark.postgres

#: user and session ids whose code-point order differs from a locale's
_USERS = ["alice", "Bob", "bob", "Émile", "zoë", "_x", "u-10", "u-9"]


def _plain_events(store, session_id, owner):
    found = [e for user in sorted(set(store.session_subjects(session_id)))
             for e in store.list_events(user, owner_subject=owner) if e.session_id == session_id]
    return tuple(sorted(found, key=lambda e: (e.user_id, *log_order(e))))


def _seed(adapter, rng: random.Random, sessions: int, *, states: bool = True) -> list[str]:
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    ids = [f"{rng.choice(['s', 'S', 'é', '_'])}-{i:03d}" for i in range(sessions)]
    for sid in ids:
        events = [MemoryEvent(
            event_id=str(uuid.uuid4()), user_id=rng.choice(_USERS), content=f"turn of {sid}",
            created_at=base + timedelta(seconds=rng.randrange(3)),  # ties in created_at
            embedding=[rng.random()], meta={"sid": sid},
            owner_subject=rng.choice(["acme", "", "other"]), session_id=sid)
            for _ in range(rng.randrange(5))]
        if states:
            adapter.commit_turn(sid, sid.encode(), expected_version=None,
                                owner_subject="acme", events=events)
        else:
            for event in events:
                adapter.event_store().append(event)
    return ids


@pytest.mark.parametrize("seed", [1, 2])
def test_one_pass_gives_each_sessions_events_as_the_plain_definition(postgres_adapter_factory,
                                                                     seed):
    adapter = postgres_adapter_factory()
    ids = _seed(adapter, random.Random(seed), sessions=90)
    adapter.event_store().append(MemoryEvent(event_id=str(uuid.uuid4()), user_id="alice",
                                             content="outside any session"))
    store = adapter.event_store()
    for owner in (UNSCOPED, "acme", None):
        passed = list(store.events_by_session(owner_subject=owner, page=7))
        listed = [sid for sid, _ in passed]
        assert listed == sorted(listed) and len(set(listed)) == len(listed)
        expected = {sid: _plain_events(store, sid, owner) for sid in ids}
        assert dict(passed) == {sid: events for sid, events in expected.items() if events}


def test_a_whole_store_export_takes_the_same_records_as_the_per_user_way(postgres_adapter_factory,
                                                                         monkeypatch):
    monkeypatch.setattr(export_module, "READ_CHUNK", 64)  # the pass spans several chunks
    adapter = postgres_adapter_factory()
    _seed(adapter, random.Random(3), sessions=150)  # three chunks of 64
    for owner in (UNSCOPED, "acme"):
        streamed = list(iter_records(adapter, ExportResult(), with_events=True,
                                     owner_subject=owner))
        per_user = list(iter_records(adapter, ExportResult(), with_events=True,
                                     owner_subject=owner,
                                     summaries=list(adapter.iter_sessions(owner_subject=owner))))
        assert streamed == per_user and sum(len(r.events) for r in streamed) > 50


def test_a_listing_out_of_order_is_still_matched_right(postgres_adapter_factory):
    adapter = postgres_adapter_factory()
    ids = sorted(_seed(adapter, random.Random(4), sessions=40))
    store = adapter.event_store()
    matched = _StreamedEvents(store, UNSCOPED)
    first, later = ids[10:20], ids[:10][::-1] + ids[20:]  # the second chunk goes back
    found = {**matched.of_chunk(first), **matched.of_chunk(later)}
    matched.close()
    assert found == {sid: _plain_events(store, sid, UNSCOPED) for sid in ids}


def _pass_connections(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND query LIKE %s",
            ("%semvecctl_stream%",)).fetchone()[0]  # the pass's cursor (DECLARE, FETCH)


def test_an_export_stopped_early_closes_the_pass(postgres_adapter_factory, pgvector_url,
                                                 monkeypatch):
    monkeypatch.setattr(export_module, "READ_CHUNK", 64)  # stopped inside the pass, not after it
    adapter = postgres_adapter_factory()
    _seed(adapter, random.Random(5), sessions=200)
    records = iter_records(adapter, ExportResult(), with_events=True)
    next(records)
    assert _pass_connections(pgvector_url) == 1
    records.close()
    assert _pass_connections(pgvector_url) == 0


def test_over_shards_the_pass_skips_misplaced_copies_and_keeps_the_primarys(sharded_sql):
    from backends.registry import Registry

    adapter = Registry().load_adapter("postgres", uri=sharded_sql.primary,
                                      shards=sharded_sql.shard_list)
    try:
        ids = _seed(adapter, random.Random(6), sessions=30)
        store = adapter.event_store()
        store.append(MemoryEvent(event_id=str(uuid.uuid4()), user_id="zoë", content="loose",
                                 session_id=ids[0]))  # outside a turn: on the primary
        moved = next(sid for sid in ids[1:] if _plain_events(store, sid, UNSCOPED))
        holder = next(url for url in sharded_sql.shards if _has_events(url, moved))
        stray = next(url for url in sharded_sql.shards if url != holder)
        with psycopg.connect(holder) as src, psycopg.connect(stray) as dst:
            for row in src.execute("SELECT * FROM semvec_memory_events WHERE session_id = %s",
                                   (moved,)).fetchall():  # an old copy a reshard left
                dst.execute("INSERT INTO semvec_memory_events VALUES"
                            " (%s, %s, %s, %s, %s, %s, %s, %s, %s)", row)
        passed = dict(store.events_by_session(page=5))
        assert passed == {sid: events for sid in ids
                          if (events := _plain_events(store, sid, UNSCOPED))}
        assert any(e.content == "loose" for e in passed[ids[0]])
    finally:
        adapter.close()


def _has_events(url: str, session_id: str) -> bool:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM semvec_memory_events WHERE session_id = %s",
                            (session_id,)).fetchone()[0] > 0
