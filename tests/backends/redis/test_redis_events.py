"""The Redis event store on a real redis-server, including the documented hash layout."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from backends.contract import EventStore, MemoryEvent
from backends.errors import InvalidEvent, StateVersionConflict
from backends.redis import RedisBackendAdapter
from backends.redis.schema import EVENT_FIELDS

pytestmark = pytest.mark.redis

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
SOURCE = "6f1c2d3e-4b5a-4c6d-8e7f-90a1b2c3d4e5"


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


def eid() -> str:
    return str(uuid.uuid4())


def ev(user: str, content: str = "c", **kw) -> MemoryEvent:
    return MemoryEvent(event_id=eid(), user_id=user, content=content, **kw)


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
        event_id=eid(), user_id=user, content="héllo\nworld", created_at=T0,
        embedding=(0.25, -1.0, 3e-8), meta={"tool": "search", "n": [1, 2], "ok": True},
        source_event_id=SOURCE, owner_subject="acme/bot", session_id="sess-1",
    )
    stored = events.append(original)
    assert stored == original.with_sequence(1)
    assert events.get_event(original.event_id) == stored
    assert events.get_event(uid("missing")) is None


def test_hash_is_readable_field_by_field_in_the_documented_layout(events, raw):
    user = uid("u")
    e = MemoryEvent(event_id=eid(), user_id=user, content="text", created_at=T0,
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


@pytest.mark.parametrize("embedding", ["", "null", "[]"])
def test_engine_and_older_encodings_are_readable(events, raw, embedding):
    """The engine writes '[]' for no embedding; this store once wrote 'null' (and ''):
    all read back as an empty embedding, and '' as unowned."""
    user, event_id = uid("u"), eid()
    raw.hset(f"semvec:events:e:{event_id}", mapping={
        "event_id": event_id, "user_id": user, "owner_subject": "", "session_id": "",
        "created_at": T0.isoformat(), "content": "from the engine", "embedding": embedding,
        "meta": "{}", "source_event_id": "", "sequence": "1",
    })
    raw.zadd(f"semvec:events:u:{user}", {event_id: 1})
    raw.zadd(f"semvec:events:t:{user}", {event_id: T0.timestamp()})
    raw.set(f"semvec:events:seq:{user}", 1)
    listed = events.list_events(user)
    assert [e.content for e in listed] == ["from the engine"]
    assert listed[0].embedding == () and listed[0].owner_subject == ""
    assert events.list_events(user, owner_subject=None) == listed
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
    from backends.redis import events as event_store

    monkeypatch.setattr(event_store, "PAGE_SIZE", 3)  # force several pages
    user = uid("u")
    # None and "" are both unowned (the engine's encoding is "")
    owners = ["acme", None, "acme", "other", "", "acme", "acme", None]
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
    from backends.redis import events as event_store

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
    from backends.redis import events as event_store

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


# -- the engine's shape and surface (issue #12), owner filter on get_event (#14) ---------


class EngineStyleEvent:
    """Duck-typed like the engine's event object (UUID objects, lists, "" for unowned);
    the engine's own class is never imported."""

    def __init__(self, user_id: str, content: str, **kw) -> None:
        self.event_id = uuid.uuid4()
        self.user_id = user_id
        self.created_at = kw.get("created_at", T0)
        self.content = content
        self.embedding = kw.get("embedding", [])
        self.meta = kw.get("meta", {})
        self.source_event_id = kw.get("source_event_id")
        self.sequence = 0
        self.owner_subject = kw.get("owner_subject", "")
        self.session_id = kw.get("session_id", "")


def keys_of(raw, user: str) -> dict:
    """Every key a write for ``user`` could touch, with its contents."""
    return {
        "seq": raw.zrange(f"semvec:events:u:{user}", 0, -1, withscores=True),
        "time": raw.zrange(f"semvec:events:t:{user}", 0, -1, withscores=True),
        "counter": raw.get(f"semvec:events:seq:{user}"),
        "hashes": sorted(raw.scan_iter(match="semvec:events:e:*", count=1000)),
    }


def test_empty_embedding_and_absent_strings_are_stored_in_the_engine_encoding(events, raw):
    user = uid("u")
    e = events.append(MemoryEvent(event_id=eid(), user_id=user, content="c"))
    fields = raw.hgetall(f"semvec:events:e:{e.event_id}")
    assert fields[b"embedding"] == b"[]"  # never null: the engine parses a list
    assert fields[b"owner_subject"] == b"" and fields[b"session_id"] == b""
    assert fields[b"source_event_id"] == b"" and fields[b"sequence"] == b"1"
    assert events.get_event(e.event_id).embedding == ()


@pytest.mark.parametrize(
    "bad",
    [
        dict(event_id="not-a-uuid"),
        dict(source_event_id="src-1"),
        dict(embedding=(0.1, float("nan"))),
        dict(embedding=(float("inf"),)),
        dict(embedding=("x",)),
    ],
    ids=["event-id", "source-id", "nan", "inf", "not-numbers"],
)
def test_refused_events_leave_the_store_unchanged(events, raw, bad):
    user = uid("u")
    events.append(ev(user))
    before = keys_of(raw, user)
    fields = dict(event_id=eid(), user_id=user, content="c")
    fields.update(bad)
    with pytest.raises(InvalidEvent):
        events.append(MemoryEvent(**fields))
    with pytest.raises(InvalidEvent):
        events.restore_events([MemoryEvent(**{**fields, "sequence": 9})])
    assert keys_of(raw, user) == before


def test_engine_event_objects_are_accepted_and_returned_in_the_engine_shape(events):
    user = uid("u")
    source = uuid.uuid4()
    engine_event = EngineStyleEvent(user, "from the engine", embedding=[0.5, 0.25],
                                    source_event_id=source, meta={"k": 1})
    stored = events.append(engine_event)
    assert stored.event_id == str(engine_event.event_id) and stored.sequence == 1
    assert stored.to_dict() == {
        "event_id": str(engine_event.event_id), "user_id": user,
        "created_at": T0.isoformat(), "content": "from the engine", "embedding": [0.5, 0.25],
        "meta": {"k": 1}, "source_event_id": str(source),
        "owner_subject": "", "session_id": "",
    }
    assert events.get(engine_event.event_id) == stored  # the engine passes UUID objects


def test_get_event_applies_the_owner_filter_in_both_conventions(events):
    from backends.contract import OwnerScope

    user = uid("u")
    owned = events.append(ev(user, owner_subject="acme/bot"))
    unowned = events.append(ev(user))
    get = events.get_event
    assert get(owned.event_id) == owned                       # unscoped
    assert get(owned.event_id, owner_subject="acme/bot") == owned
    assert get(owned.event_id, owner_subject="acme") is None  # exact match only
    assert get(owned.event_id, owner_subject=None) is None    # unowned only
    assert get(unowned.event_id, owner_subject=None) == unowned
    assert get(unowned.event_id, owner_subject="acme/bot") is None
    # scope=: an object means that owner; scope=None means unscoped (never "unowned only")
    assert get(owned.event_id, scope=OwnerScope("acme", "bot")) == owned
    assert get(owned.event_id, scope=OwnerScope("acme")) is None
    assert get(owned.event_id, scope=None) == owned
    assert get(unowned.event_id, scope=OwnerScope("acme", "bot")) is None
    with pytest.raises(TypeError):
        get(owned.event_id, owner_subject="acme/bot", scope=OwnerScope("acme", "bot"))


def test_list_events_scope_parity(events):
    from backends.contract import OwnerScope

    user = uid("u")
    for owner in ("acme", "", "acme", "beta"):
        events.append(ev(user, owner_subject=owner))
    assert events.list_events(user, scope=OwnerScope("acme")) == \
        events.list_events(user, owner_subject="acme")
    assert events.list_events(user, scope=None) == events.list_events(user)
    assert len(events.list_events(user, scope=None)) == 4
    assert [e.sequence for e in events.list_events(user, owner_subject=None)] == [2]


def test_engine_event_surface(events, raw):
    user = uid("u")
    events.init_schema()
    stored = [events.append(ev(user, str(i), created_at=T0 + timedelta(minutes=i),
                               embedding=(1.0, float(i)))) for i in range(4)]
    assert events.list_by_user(user) == stored
    assert events.count_for_user(user) == 4 == raw.zcard(f"semvec:events:u:{user}")
    assert events.count_for_user(uid("nobody")) == 0
    newest = events.query_by_user(user, query_embedding=None, limit=2)
    assert [e.content for e in newest] == ["3", "2"]
    closest = events.query_by_user(user, query_embedding=[0.0, 1.0], limit=1)
    assert closest[0].content == "3"
    # delete one event: gone from the hash and both indexes, the counter stays
    assert events.delete(uuid.UUID(stored[0].event_id)) is True
    assert events.delete(stored[0].event_id) is False
    assert raw.zscore(f"semvec:events:u:{user}", stored[0].event_id) is None
    assert raw.zscore(f"semvec:events:t:{user}", stored[0].event_id) is None
    assert events.count_for_user(user) == 3
    assert events.append(ev(user)).sequence == 5
    # the engine's delete_older_than(user_id, cutoff), strictly older
    assert events.delete_older_than(user, T0 + timedelta(minutes=2)) == 1
    assert [e.content for e in events.list_by_user(user)] == ["2", "3", "c"]
    assert events.delete_by_user(user) == 3
    assert events.append(ev(user)).sequence == 1  # the counter was reset too


def test_delete_events_before_is_our_spelling(events):
    user = uid("u")
    events.append(ev(user, created_at=T0 - timedelta(days=1)))
    events.append(ev(user, created_at=T0))
    assert events.delete_events_before(T0, user_id=user) == 1
    assert [e.sequence for e in events.list_events(user)] == [2]


def test_session_subjects(events):
    s, other = uid("s"), uid("s")
    alice, bob, carol = uid("alice"), uid("bob"), uid("carol")
    events.append(ev(alice, session_id=s))
    events.append(ev(bob, session_id=s))
    events.append(ev(bob, session_id=s))
    events.append(ev(carol, session_id=other))
    assert events.session_subjects(s) == sorted([alice, bob])
    assert events.session_subjects(uid("none")) == []
    # every session at once, in one scan (what an export with events uses)
    mapping = events.subjects_by_session()
    assert mapping[s] == sorted([alice, bob]) and mapping[other] == [carol]
    assert all(users == sorted(set(users)) for users in mapping.values())


def test_restore_events_keeps_sequences_and_raises_the_counter(events, raw):
    user = uid("u")
    restored = [ev(user, "a").with_sequence(3), ev(user, "b").with_sequence(7)]
    assert events.restore_events(restored) == 2
    assert [(e.content, e.sequence) for e in events.list_events(user)] == [("a", 3), ("b", 7)]
    assert events.read_counter(user) == 7
    assert events.append(ev(user, "next")).sequence == 8
    # an id already stored is a conflict and nothing of the batch is written
    before = keys_of(raw, user)
    with pytest.raises(StateVersionConflict):
        events.restore_events([ev(user, "new").with_sequence(20),
                               MemoryEvent(event_id=restored[0].event_id, user_id=user,
                                           content="dup", sequence=21)])
    assert keys_of(raw, user) == before
    # so is a sequence another event of that user holds
    with pytest.raises(StateVersionConflict):
        events.restore_events([ev(user, "taken").with_sequence(7)])
    assert keys_of(raw, user) == before
    with pytest.raises(InvalidEvent):
        events.restore_events([ev(user, "unsequenced")])
    assert keys_of(raw, user) == before
    assert events.restore_events([]) == 0


def test_counters_are_read_and_only_ever_raised(events):
    user = uid("u")
    assert events.read_counter(user) == 0
    assert events.raise_counter(user, 0) == 0
    assert events.read_counter(user) == 0
    assert events.raise_counter(user, 5) == 5
    assert events.raise_counter(user, 2) == 5  # never lowered
    assert events.read_counter(user) == 5
    assert events.append(ev(user)).sequence == 6
    with pytest.raises(ValueError):
        events.raise_counter(user, -1)
    with pytest.raises(ValueError):
        events.raise_counter(user, True)
