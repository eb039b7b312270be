"""The Redis event store on a real redis-server, including the documented hash layout."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from backends.contract import EventStore, MemoryEvent
from backends.errors import InvalidEvent
from backends.redis import RedisBackendAdapter
from backends.redis.keys import EVENT_FIELDS

pytestmark = pytest.mark.redis

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)


@pytest.fixture
def events(redis_url):
    with RedisBackendAdapter(redis_url) as adapter:
        yield adapter.event_store()


@pytest.fixture
def raw(redis_server):
    with redis_server.client() as client:
        yield client


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def ev(user: str, content: str = "c", **kw) -> MemoryEvent:
    return MemoryEvent(event_id=uid("e"), user_id=user, content=content, **kw)


def test_is_an_event_store(events):
    assert isinstance(events, EventStore)


def test_append_assigns_gap_free_sequences_per_user(events):
    alice, bob = uid("alice"), uid("bob")
    assert events.append(ev(alice)).sequence == 1
    assert events.append(ev(bob)).sequence == 1
    assert events.append(ev(alice)).sequence == 2


def test_round_trip_fidelity(events):
    user = uid("u")
    original = MemoryEvent(
        event_id=uid("e"), user_id=user, content="héllo\nworld", created_at=T0,
        embedding=(0.25, -1.0, 3e-8), meta={"tool": "search", "n": [1, 2], "ok": True},
        source_event_id="src-1", owner_subject="acme/bot", session_id="sess-1",
    )
    stored = events.append(original)
    assert stored == original.with_sequence(1)
    assert events.get_event(original.event_id) == stored
    assert events.get_event(uid("missing")) is None


def test_hash_is_readable_field_by_field_in_the_documented_layout(events, raw):
    user = uid("u")
    e = MemoryEvent(event_id=uid("e"), user_id=user, content="text", created_at=T0,
                    embedding=(1.0, 2.5), meta={"k": "v"}, owner_subject="acme",
                    session_id="s1")
    events.append(e)
    key = f"semvec:events:e:{e.event_id}"
    fields = {k.decode(): v.decode() for k, v in raw.hgetall(key).items()}
    assert set(fields) == {"event_id", "user_id", "owner_subject", "session_id", "created_at",
                           "content", "embedding", "meta", "source_event_id", "sequence"}
    assert set(fields) == set(EVENT_FIELDS)
    assert fields["event_id"] == e.event_id
    assert fields["user_id"] == user
    assert fields["owner_subject"] == "acme"
    assert fields["session_id"] == "s1"
    assert datetime.fromisoformat(fields["created_at"]) == T0
    assert fields["content"] == "text"
    assert json.loads(fields["embedding"]) == [1.0, 2.5]
    assert json.loads(fields["meta"]) == {"k": "v"}
    assert fields["source_event_id"] == ""
    assert fields["sequence"] == "1"
    assert raw.zscore(f"semvec:events:u:{user}", e.event_id) == 1.0
    assert raw.zscore(f"semvec:events:t:{user}", e.event_id) == T0.timestamp()
    assert raw.get(f"semvec:events:seq:{user}") == b"1"


def test_engine_written_event_is_readable(events, raw):
    user, event_id = uid("u"), uid("e")
    raw.hset(f"semvec:events:e:{event_id}", mapping={
        "event_id": event_id, "user_id": user, "owner_subject": "", "session_id": "",
        "created_at": T0.isoformat(), "content": "from the engine", "embedding": "",
        "meta": "{}", "source_event_id": "", "sequence": "1",
    })
    raw.zadd(f"semvec:events:u:{user}", {event_id: 1})
    raw.zadd(f"semvec:events:t:{user}", {event_id: T0.timestamp()})
    raw.set(f"semvec:events:seq:{user}", 1)
    listed = events.list_events(user)
    assert [e.content for e in listed] == ["from the engine"]
    assert listed[0].embedding is None and listed[0].owner_subject is None
    assert events.append(ev(user)).sequence == 2  # continues the engine's counter


def test_list_in_sequence_order_with_after_and_limit(events):
    user = uid("u")
    # created_at deliberately out of order: listing follows the sequence
    for i in range(7):
        events.append(ev(user, str(i), created_at=T0 - timedelta(minutes=i)))
    assert [e.content for e in events.list_events(user)] == [str(i) for i in range(7)]
    assert [e.sequence for e in events.list_events(user, after_sequence=4)] == [5, 6, 7]
    assert [e.sequence for e in events.list_events(user, limit=2)] == [1, 2]
    assert [e.sequence for e in events.list_events(user, after_sequence=2, limit=3)] == [3, 4, 5]
    assert events.list_events(user, limit=0) == []
    assert events.list_events(uid("nobody")) == []


def test_three_state_owner_filter_applies_before_the_limit(events, monkeypatch):
    from backends.redis import event_store

    monkeypatch.setattr(event_store, "PAGE_SIZE", 3)  # force several pages
    user = uid("u")
    owners = ["acme", None, "acme", "other", None, "acme", "acme", None]
    for owner in owners:
        events.append(ev(user, owner_subject=owner))
    assert [e.sequence for e in events.list_events(user, owner_subject="acme")] == [1, 3, 6, 7]
    assert [e.sequence for e in events.list_events(user, owner_subject=None)] == [2, 5, 8]
    assert len(events.list_events(user)) == 8
    assert [e.sequence for e in events.list_events(user, owner_subject="acme", limit=3)] == [1, 3, 6]
    assert [e.sequence for e in events.list_events(user, owner_subject=None, limit=2)] == [2, 5]
    assert events.list_events(user, owner_subject="acme/bot") == []


def test_duplicate_event_id_is_refused(events, raw):
    user = uid("u")
    first = events.append(ev(user))
    with pytest.raises(InvalidEvent):
        events.append(MemoryEvent(event_id=first.event_id, user_id=user, content="again"))
    assert raw.get(f"semvec:events:seq:{user}") == b"1"


def test_delete_older_than_is_strict_and_cleans_every_index(events, raw):
    user = uid("u")
    stamps = [T0 - timedelta(days=3), T0 - timedelta(microseconds=1), T0, T0 + timedelta(days=1)]
    stored = [events.append(ev(user, str(i), created_at=t)) for i, t in enumerate(stamps)]
    assert events.delete_older_than(T0, user_id=user) == 2
    assert [e.content for e in events.list_events(user)] == ["2", "3"]
    for gone in stored[:2]:
        assert events.get_event(gone.event_id) is None
        assert raw.zscore(f"semvec:events:u:{user}", gone.event_id) is None
        assert raw.zscore(f"semvec:events:t:{user}", gone.event_id) is None
    assert raw.zcard(f"semvec:events:t:{user}") == 2
    # the counter continues: no sequence is ever reused
    assert events.append(ev(user)).sequence == 5


def test_delete_older_than_across_users_and_in_batches(events, monkeypatch):
    from backends.redis import event_store

    monkeypatch.setattr(event_store, "DELETE_BATCH", 2)
    alice, bob = uid("alice"), uid("bob")
    for i in range(5):
        events.append(ev(alice, created_at=T0 - timedelta(hours=i + 1)))
    events.append(ev(bob, created_at=T0 - timedelta(hours=1)))
    events.append(ev(bob, created_at=T0 + timedelta(hours=1)))
    assert events.delete_older_than(T0) == 6
    assert events.list_events(alice) == []
    assert [e.sequence for e in events.list_events(bob)] == [2]


def test_delete_older_than_needs_an_aware_cutoff(events):
    with pytest.raises(ValueError):
        events.delete_older_than(datetime(2026, 1, 1))


def test_purge_user_erases_events_indexes_and_counter(events, raw, monkeypatch):
    from backends.redis import event_store

    monkeypatch.setattr(event_store, "DELETE_BATCH", 2)  # several batches
    user, other = uid("u"), uid("other")
    stored = [events.append(ev(user, str(i))) for i in range(5)]
    kept = events.append(ev(other))
    assert events.purge_user(user) == 5
    for e in stored:
        assert events.get_event(e.event_id) is None
    for prefix in ("u", "t", "seq"):
        assert not raw.exists(f"semvec:events:{prefix}:{user}")
    assert events.list_events(user) == []
    assert events.append(ev(user)).sequence == 1  # the counter is gone too
    assert events.get_event(kept.event_id) == kept
    assert events.purge_user(uid("nobody")) == 0
    with pytest.raises(ValueError):
        events.purge_user("")
