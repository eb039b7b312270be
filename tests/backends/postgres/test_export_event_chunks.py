"""An export's events read a chunk at a time, ahead of the chunk being written, are each
session's events as the plain definition reads them: the session's users (minus the
whole-user logs), each user's events of that session, ordered by user then
``log_order``. On the suite's real PostgreSQL, with users spanning chunks, several users
per session, ties in ``created_at``, an owner filter and a cache small enough to be
emptied mid-export."""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from backends.archive.format import log_order
from backends.contract import UNSCOPED, MemoryEvent
from backends.errors import CorruptEvent
from backends.transfer import export
from backends.transfer.export import ExportResult, iter_records

pytestmark = pytest.mark.postgres


def _plain_events(store, session_id, owner, skip):
    found = [e for user in sorted(set(store.session_subjects(session_id)) - skip)
             for e in store.list_events(user, owner_subject=owner) if e.session_id == session_id]
    return tuple(sorted(found, key=lambda e: (e.user_id, *log_order(e))))


def _seed(adapter, rng: random.Random, sessions: int) -> None:
    states, events = adapter.state_store(), adapter.event_store()
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(sessions):
        sid = f"s-{i:04d}"
        states.save(sid, f"blob {i}".encode(), expected_version=None, owner_subject="acme")
        for _ in range(rng.randrange(4)):
            user = f"u-{rng.randrange(12)}" if rng.random() < 0.7 else f"own-{i}"
            events.append(MemoryEvent(
                event_id=str(uuid.uuid4()), user_id=user, content=f"turn of {sid}",
                created_at=base + timedelta(seconds=rng.randrange(5)),  # many ties
                embedding=[rng.random()], meta={"i": i},
                owner_subject=rng.choice(["acme", "", "other"]), session_id=sid))


@pytest.mark.parametrize("seed", [1, 2])
def test_chunked_events_are_the_plain_definition(postgres_adapter_factory, monkeypatch, seed):
    adapter = postgres_adapter_factory()
    _seed(adapter, random.Random(seed), sessions=150)  # three chunks of 64
    monkeypatch.setattr(export, "LOG_CACHE_EVENTS", 25)  # emptied more than once
    store = adapter.event_store()
    for owner, skip in ((UNSCOPED, set()), ("acme", {"u-3", "own-7"})):
        records = list(iter_records(adapter, ExportResult(), with_events=True,
                                    owner_subject=owner, users=sorted(skip)))
        assert records
        for record in records:
            assert record.events == _plain_events(store, record.session_id, owner, skip)


def test_a_damaged_event_read_ahead_stops_the_export_naming_it(postgres_adapter_factory,
                                                               pgvector_url):
    import psycopg

    adapter = postgres_adapter_factory()
    _seed(adapter, random.Random(3), sessions=100)
    adapter.event_store().append(MemoryEvent(event_id=str(uuid.uuid4()), user_id="broken",
                                             content="x", session_id="s-0090",
                                             embedding=[1.0]))
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("UPDATE semvec_memory_events SET embedding = '[NaN'"
                     " WHERE user_id = 'broken'")
    with pytest.raises(CorruptEvent, match="embedding"):
        list(iter_records(adapter, ExportResult(), with_events=True))
