"""Restoring a batch of copied events into the engine's SQL layout (``append_batch``,
which copies, migrations and imports reach through the restorer of a store that keeps no
numbers) writes them all in one transaction, as ``append`` of each would, or none of
them when one id is already recorded. On the suite's real PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from backends.errors import InvalidEvent
from backends.contract import MemoryEvent
from backends.transfer.loss import event_restorer

pytestmark = pytest.mark.postgres


def _events(n: int, user: str = "alice") -> list[MemoryEvent]:
    base = datetime(2026, 3, 1, tzinfo=timezone.utc)
    return [MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=f"turn {i}",
                        session_id=f"s-{i % 3}", created_at=base + timedelta(seconds=i),
                        embedding=[float(i)], meta={"i": i}, sequence=i + 1)
            for i in range(n)]


def test_a_batch_is_written_whole_and_read_back_as_appended(postgres_adapter_factory):
    adapter = postgres_adapter_factory()
    events = _events(7)
    assert event_restorer(adapter).restore_events(events) == 7
    listed = adapter.event_store().list_events("alice")
    assert sorted(e.event_id for e in listed) == sorted(e.event_id for e in events)
    assert {e.sequence for e in listed} == {0}  # the layout keeps no numbers
    by_id = {e.event_id: e for e in listed}
    assert all(by_id[e.event_id].content == e.content and by_id[e.event_id].meta == e.meta
               for e in events)


def test_one_id_already_recorded_writes_none_of_the_batch(postgres_adapter_factory):
    adapter = postgres_adapter_factory()
    first = _events(2)
    event_restorer(adapter).restore_events(first[:1])
    batch = _events(4, user="bob") + first[:1]
    with pytest.raises(InvalidEvent, match="already recorded"):
        event_restorer(adapter).restore_events(batch)
    assert adapter.event_store().list_events("bob") == []
