"""The two owner conventions (spec ``owner_subject=``, engine ``scope=``), the owner-scope
type and the engine-shaped event value, at the contract level (memory backend; the
per-backend parity tests live beside each backend)."""

from __future__ import annotations

import inspect
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest

from backends.contract import (
    UNSCOPED,
    EngineEventSurface,
    LoadedState,
    MemoryEvent,
    OwnerScope,
    coerce_event,
    validate_event,
    validate_turn_events,
)
from backends.errors import InvalidEvent, StateVersionConflict
from backends.memory import MemoryBackendAdapter


# -- OwnerScope: the engine's encoding ---------------------------------------------------


@pytest.mark.parametrize("scope, encoded", [
    (OwnerScope("acme"), "acme"),
    (OwnerScope("acme", "bot-1"), "acme/bot-1"),
])
def test_owner_scope_encodes_and_decodes_exactly(scope, encoded):
    assert scope.owner_subject == encoded
    assert OwnerScope.decode(encoded) == scope


@pytest.mark.parametrize("text", [None, ""])
def test_owner_scope_decodes_nothing_to_none(text):
    assert OwnerScope.decode(text) is None


def test_owner_scope_decode_splits_at_the_first_slash_only():
    # a second '/' would belong to the agent part, which may not contain one
    with pytest.raises(ValueError, match="agent"):
        OwnerScope.decode("a/b/c")


@pytest.mark.parametrize("tenant, agent", [
    ("", None), ("   ", None), ("a/b", None), ("acme", ""), ("acme", " "), ("acme", "x/y"),
    (3, None),
])
def test_owner_scope_refuses_blank_parts_and_separators(tenant, agent):
    with pytest.raises(ValueError):
        OwnerScope(tenant, agent)


# -- both conventions on a store -------------------------------------------------------


@dataclass(frozen=True)
class ForeignScope:
    """Any object with an ``owner_subject`` string is a scope (the engine's own type is
    never imported)."""

    owner_subject: str


def _seed():
    adapter = MemoryBackendAdapter()
    store = adapter.state_store()
    store.save("owned", b"o", expected_version=None, owner_subject="acme/bot")
    store.save("unowned", b"u", expected_version=None)
    return adapter, store


@pytest.mark.parametrize("scope", [OwnerScope("acme", "bot"), ForeignScope("acme/bot")])
def test_scope_and_owner_subject_read_the_same(scope):
    _adapter, store = _seed()
    for method in ("load", "load_full", "load_owner", "current_version", "describe_session"):
        for sid in ("owned", "unowned"):
            by_scope = getattr(store, method)(sid, scope=scope)
            by_owner = getattr(store, method)(sid, owner_subject="acme/bot")
            assert by_scope == by_owner, (method, sid)


def test_scope_none_is_unscoped_but_owner_subject_none_is_unowned_only():
    _adapter, store = _seed()
    assert store.load("owned", scope=None) == (b"o", 1)
    assert store.load("owned") == (b"o", 1)
    assert store.load("owned", owner_subject=None) is None
    assert store.load("unowned", owner_subject=None) == (b"u", 1)
    ids = [s.session_id for s in store.iter_sessions(scope=None)]
    assert ids == ["owned", "unowned"]
    assert [s.session_id for s in store.iter_sessions(owner_subject=None)] == ["unowned"]


def test_scope_writes_and_adopts_like_owner_subject():
    adapter, store = _seed()
    assert adapter.commit_turn("unowned", b"u2", expected_version=1,
                               scope=OwnerScope("acme")) == 2
    assert store.load_owner("unowned") == "acme"
    with pytest.raises(StateVersionConflict):
        store.save("owned", b"x", expected_version=1, scope=OwnerScope("other"))
    assert store.save("new", b"n", expected_version=None, scope=None) == 1
    assert store.load_owner("new") is None


def test_scoped_delete_is_exact():
    _adapter, store = _seed()
    assert store.delete("owned", scope=OwnerScope("acme")) is False
    assert store.delete("owned", scope=OwnerScope("acme", "bot")) is True


def test_both_spellings_at_once_are_refused():
    _adapter, store = _seed()
    with pytest.raises(TypeError, match="not both"):
        store.load("owned", owner_subject="acme/bot", scope=OwnerScope("acme", "bot"))


@pytest.mark.parametrize("scope", [ForeignScope(""), object(), "acme"])
def test_a_scope_without_an_owner_string_is_refused(scope):
    _adapter, store = _seed()
    with pytest.raises(ValueError, match="scope"):
        store.load("owned", scope=scope)


def test_signatures_advertise_scope_for_capability_detection():
    adapter, store = _seed()
    for member in (store.save, store.load, store.load_full, store.delete, adapter.commit_turn):
        assert "scope" in inspect.signature(member).parameters, member.__name__
    # the engine calls these with the session id alone
    assert store.load_owner("owned") == "acme/bot" and store.current_version("owned") == 1


def test_load_is_the_engines_tuple_and_load_full_unpacks():
    _adapter, store = _seed()
    blob, version = store.load("owned")
    assert (blob, version) == (b"o", 1)
    full = store.load_full("owned")
    assert isinstance(full, LoadedState)
    assert tuple(full) == (b"o", 1, "acme/bot", None)


# -- version-checked delete -------------------------------------------------------------


def test_delete_with_expected_version_refuses_a_moved_row_and_keeps_it():
    _adapter, store = _seed()
    store.save("owned", b"o2", expected_version=1, owner_subject="acme/bot")
    with pytest.raises(StateVersionConflict, match="nothing was deleted"):
        store.delete("owned", expected_version=1)
    assert store.load("owned") == (b"o2", 2)
    assert store.delete("owned", expected_version=2) is True
    assert store.delete("owned", expected_version=2) is False


# -- events in the engine's shape --------------------------------------------------------


@dataclass
class EngineLikeEvent:
    """Stands in for the engine's event class: UUID objects, list embedding, '' owner."""

    event_id: uuid.UUID
    user_id: str
    created_at: datetime
    content: str
    embedding: list
    meta: dict
    source_event_id: uuid.UUID | None = None
    sequence: int = 0
    owner_subject: str = ""
    session_id: str = ""


def test_engine_event_objects_are_coerced_to_canonical_events():
    eid, src = uuid.uuid4(), uuid.uuid4()
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    event = validate_event(EngineLikeEvent(eid, "u1", when, "hi", [1, 2.5], {"k": 1}, src))
    assert isinstance(event, MemoryEvent)
    assert event.event_id == str(eid) and event.source_event_id == str(src)
    assert event.embedding == (1.0, 2.5)
    assert event.owner_subject == "" and event.session_id == "" and event.sequence == 0
    assert list(event.to_dict().items()) == [
        ("event_id", str(eid)), ("user_id", "u1"), ("created_at", "2025-01-02T03:04:05+00:00"),
        ("content", "hi"), ("embedding", [1.0, 2.5]), ("meta", {"k": 1}),
        ("owner_subject", ""), ("session_id", ""), ("source_event_id", str(src)),
    ]  # the engine's keys, in its order; sequence belongs to the store
    assert MemoryEvent.from_dict(event.to_dict()) == event
    stored = event.with_sequence(7)
    assert MemoryEvent.from_dict({**stored.to_dict(), "sequence": 7}) == stored


def test_uppercase_uuid_text_is_stored_in_canonical_form():
    eid = uuid.uuid4()
    event = validate_event(MemoryEvent(event_id=str(eid).upper(), user_id="u", content="c"))
    assert event.event_id == str(eid)


@pytest.mark.parametrize("change, field", [
    ({"event_id": "not-a-uuid"}, "event_id"),
    ({"event_id": ""}, "event_id"),
    ({"source_event_id": "src-1"}, "source_event_id"),
    ({"embedding": (float("nan"),)}, "embedding"),
    ({"embedding": (float("inf"), 1.0)}, "embedding"),
    ({"embedding": "1,2"}, "embedding"),
    ({"sequence": 4}, "sequence"),
    ({"user_id": ""}, "user_id"),
    ({"created_at": datetime(2020, 1, 1)}, "created_at"),
])
def test_events_the_engine_cannot_read_are_refused_by_name(change, field):
    values = {"event_id": str(uuid.uuid4()), "user_id": "u", "content": "c", **change}
    with pytest.raises(InvalidEvent, match=field):
        validate_event(MemoryEvent(**values))


def test_older_encodings_read_back_as_unowned_with_an_empty_embedding():
    record = {"event_id": str(uuid.uuid4()), "user_id": "u", "content": "c",
              "created_at": "2024-05-06T07:08:09", "embedding": None, "meta": None,
              "source_event_id": "", "sequence": "", "owner_subject": None,
              "session_id": None}
    event = MemoryEvent.from_dict(record)
    assert event.embedding == () and event.owner_subject == "" and event.session_id == ""
    assert event.source_event_id is None and event.sequence == 0
    assert event.created_at.tzinfo is not None  # naive timestamps read as UTC


def test_a_non_event_is_refused_with_a_clear_message():
    with pytest.raises(InvalidEvent, match="engine's event attributes"):
        coerce_event(object())


def test_duplicate_ids_in_one_turn_are_refused_after_canonical_folding():
    eid = uuid.uuid4()
    with pytest.raises(InvalidEvent, match="twice"):
        validate_turn_events([MemoryEvent(event_id=str(eid), user_id="u", content="a"),
                              MemoryEvent(event_id=str(eid).upper(), user_id="u", content="b")])


# -- the engine's event-store surface, derived from ours --------------------------------


class TinyEventStore(EngineEventSurface):
    """The smallest store that provides the primitives the surface is derived from."""

    def __init__(self) -> None:
        self.events: list[MemoryEvent] = []
        self.counters: dict[str, int] = {}

    def append(self, event):
        event = validate_event(event)
        n = self.counters.get(event.user_id, 0) + 1
        self.counters[event.user_id] = n
        stored = event.with_sequence(n)
        self.events.append(stored)
        return stored

    def list_events(self, user_id, *, owner_subject=UNSCOPED, after_sequence=0, limit=None):
        return [e for e in self.events if e.user_id == user_id]

    def get_event(self, event_id, *, owner_subject=UNSCOPED):
        return next((e for e in self.events if e.event_id == event_id), None)

    def delete_event(self, event_id):
        before = len(self.events)
        self.events = [e for e in self.events if e.event_id != event_id]
        return len(self.events) < before

    def purge_user(self, user_id):
        before = len(self.events)
        self.events = [e for e in self.events if e.user_id != user_id]
        self.counters.pop(user_id, None)
        return before - len(self.events)

    def delete_events_before(self, cutoff, *, user_id=None):
        keep = [e for e in self.events
                if not (e.created_at < cutoff and user_id in (None, e.user_id))]
        removed = len(self.events) - len(keep)
        self.events = keep
        return removed


def _ev(user, embedding, when):
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content="c",
                       embedding=embedding, created_at=when)


def test_engine_surface_queries_and_deletes():
    store = TinyEventStore()
    t = [datetime(2025, 1, d, tzinfo=timezone.utc) for d in (1, 2, 3)]
    a = store.append(_ev("u", (1.0, 0.0), t[0]))
    b = store.append(_ev("u", (0.0, 1.0), t[1]))
    c = store.append(_ev("u", (0.0, 0.0), t[2]))
    assert store.get(uuid.UUID(a.event_id)) == a
    assert store.list_by_user("u") == [a, b, c]
    assert store.count_for_user("u") == 3
    assert store.query_by_user("u", limit=2) == [c, b]  # newest first
    ranked = store.query_by_user("u", query_embedding=[0.0, 2.0], limit=3)
    assert ranked == [b, a, c]  # cosine descending; the zero-norm event scores 0
    assert store.delete_older_than("u", t[1]) == 1  # the engine's (user_id, cutoff)
    assert store.delete_older_than(t[2], user_id="u") == 1  # ours
    assert store.delete(uuid.UUID(c.event_id)) is True
    store.append(_ev("u", (), t[0]))
    assert store.delete_by_user("u") == 1
    assert store.append(_ev("u", (), t[0])).sequence == 1  # the counter was reset


def test_memory_retries_of_a_landed_write_return_its_version():
    _adapter, store = _seed()
    assert store.save("owned", b"o", expected_version=None, owner_subject="acme/bot") == 1
    assert store.save("owned", b"o2", expected_version=1, owner_subject="acme/bot") == 2
    assert store.save("owned", b"o2", expected_version=1, owner_subject="acme/bot") == 2
    with pytest.raises(StateVersionConflict):  # a different write is still a lost race
        store.save("owned", b"other", expected_version=1, owner_subject="acme/bot")
    with pytest.raises(StateVersionConflict):
        store.save("owned", b"o", expected_version=None, owner_subject="acme/bot")
