"""The SQL event log read a page at a time (what `events list` and `erase` stream) gives
exactly what `list_events` gives, newest first, ties in `created_at` included; on the
suite's real PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from backends.contract import MemoryEvent
from backends.ops.eventlog import iter_events

pytestmark = pytest.mark.postgres


def test_pages_match_the_whole_list_with_ties(postgres_adapter_factory):
    store = postgres_adapter_factory().event_store()
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for n in range(11):  # pairs share a timestamp: the keyset must break ties by id
        store.append(MemoryEvent(event_id=str(uuid.uuid4()), user_id="u", content=str(n),
                                 created_at=base + timedelta(seconds=n // 2),
                                 embedding=[1.0], owner_subject="acme" if n % 3 else ""))
    for owner in ("acme", None):
        whole = [e.event_id for e in store.list_events("u", owner_subject=owner)]
        for page in (1, 2, 3, 50):
            assert [e.event_id for e in iter_events(store, "u", owner_subject=owner, page=page)] == whole
    assert len(list(iter_events(store, "u", page=4))) == 11
