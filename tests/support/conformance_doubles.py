"""Test doubles for the conformance suite's own tests.

``EventfulMemoryAdapter`` is a correct in-memory adapter WITH an event store (the shipped
``memory`` backend keeps none), so the events and commit_turn groups can be exercised
without a server. The ``Broken*`` adapters each break exactly one rule, so a test can
check that the suite fails the case that names that rule.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace
from datetime import datetime
from typing import Iterator, Sequence

from backends.contract import (
    UNSCOPED,
    MemoryEvent,
    OwnerFilter,
    owner_matches,
    validate_event,
    validate_owner_filter,
    validate_turn_events,
)
from backends.errors import InjectedFault, StateVersionConflict
from backends.memory import MemoryBackendAdapter, MemoryStateStore, _Row


class InMemoryEventStore:
    """Per-user, gap-free, sequence-ordered log held in dicts (test-only)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._by_user: dict[str, list[MemoryEvent]] = {}
        self._counters: dict[str, int] = {}
        self._by_id: dict[str, MemoryEvent] = {}

    def append(self, event: MemoryEvent) -> MemoryEvent:
        event = validate_event(event)
        with self._lock:
            return self._append_validated(event)

    def _append_validated(self, event: MemoryEvent) -> MemoryEvent:
        if event.event_id in self._by_id:
            raise ValueError(f"event id {event.event_id!r} exists")
        seq = self._counters.get(event.user_id, 0) + 1
        self._counters[event.user_id] = seq
        stored = event.with_sequence(seq)
        self._by_user.setdefault(event.user_id, []).append(stored)
        self._by_id[event.event_id] = stored
        return stored

    def list_events(self, user_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
                    after_sequence: int = 0, limit: int | None = None) -> list[MemoryEvent]:
        validate_owner_filter(owner_subject)
        with self._lock:
            found = [e for e in self._by_user.get(user_id, [])
                     if e.sequence > after_sequence
                     and owner_matches(e.owner_subject, owner_subject)]
        return found[:limit] if limit is not None else found

    def get_event(self, event_id: str, *,
                  owner_subject: OwnerFilter = UNSCOPED) -> MemoryEvent | None:
        validate_owner_filter(owner_subject)
        found = self._by_id.get(str(event_id))
        if found is None or not owner_matches(found.owner_subject, owner_subject):
            return None
        return found

    def delete_older_than(self, cutoff: datetime, *, user_id: str | None = None) -> int:
        deleted = 0
        with self._lock:
            for user in [user_id] if user_id is not None else list(self._by_user):
                keep = []
                for event in self._by_user.get(user, []):
                    if event.created_at < cutoff:
                        self._by_id.pop(event.event_id, None)
                        deleted += 1
                    else:
                        keep.append(event)
                if user in self._by_user:
                    self._by_user[user] = keep
        return deleted

    def delete_event(self, event_id: str) -> bool:
        """One event by id, whether or not a listing still leads to it."""
        with self._lock:
            found = self._by_id.pop(str(event_id), None)
            if found is None:
                return False
            rows = self._by_user.get(found.user_id, [])
            self._by_user[found.user_id] = [e for e in rows if e.event_id != found.event_id]
            return True

    def purge_user(self, user_id: str) -> int:
        with self._lock:
            events = self._by_user.pop(user_id, [])
            for event in events:
                self._by_id.pop(event.event_id, None)
            self._counters.pop(user_id, None)
            return len(events)

    def is_empty(self) -> bool:
        return not any(self._by_user.values()) and not self._by_id and not self._counters


class EventfulMemoryAdapter(MemoryBackendAdapter):
    """A correct adapter with an event store: validate, then CAS, then append, under one
    lock. It offers the fault seam, and undoes the state write when a fault strikes."""

    name = "eventful-memory"
    is_persistent = False
    fault_points = frozenset({"turn.after_state", "turn.cut_connection"})

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._events = InMemoryEventStore()
        self._turn_lock = threading.Lock()
        self._armed: str | None = None

    def event_store(self) -> InMemoryEventStore:
        return self._events

    @contextlib.contextmanager
    def inject_fault(self, point: str) -> Iterator[None]:
        if point not in self.fault_points:
            raise ValueError(f"unknown fault point {point!r}")
        self._armed = point
        try:
            yield
        finally:
            self._armed = None

    def _strike(self) -> None:
        """Fire the armed fault (once) at the point after the state write."""
        point, self._armed = self._armed, None
        if point == "turn.after_state":
            raise InjectedFault("planted fault after the state write")
        if point == "turn.cut_connection":
            raise ConnectionResetError("planted connection cut after the state write")

    def commit_turn(self, session_id: str, blob: bytes, *, expected_version: int | None,
                    owner_subject: str | None = None, pending_message: str | None = None,
                    events: Sequence[MemoryEvent] | None = None) -> int:
        checked = validate_turn_events(events)
        with self._turn_lock, self._events._lock:
            previous = self._store._rows.get(session_id)
            version = self._store.save(session_id, blob, expected_version=expected_version,
                                       owner_subject=owner_subject,
                                       pending_message=pending_message)
            try:
                if self._armed:
                    self._strike()
            except Exception:
                self._undo(session_id, previous)
                raise
            for event in checked:
                self._events._append_validated(event)
            return version

    def _undo(self, session_id: str, previous: _Row | None) -> None:
        with self._store._lock:
            if previous is None:
                self._store._rows.pop(session_id, None)
            else:
                self._store._rows[session_id] = previous


class DurableMemoryAdapter(EventfulMemoryAdapter):
    """Persistent for the life of the process: every instance of the class shares one
    state store and event log, so a reopened adapter sees what a closed one wrote."""

    name = "durable-memory"
    is_persistent = True
    _shared: dict[type, tuple] = {}

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        shared = DurableMemoryAdapter._shared.setdefault(
            type(self), (self._store, self._events, self._turn_lock))
        self._store, self._events, self._turn_lock = shared


# ---------------------------------------------------------------------------------------
# Broken adapters: each breaks one rule.
# ---------------------------------------------------------------------------------------


class _StaleReturnsStore(MemoryStateStore):
    def save(self, session_id, blob, *, expected_version, owner_subject=None,
             pending_message=None):
        try:
            return super().save(session_id, blob, expected_version=expected_version,
                                owner_subject=owner_subject, pending_message=pending_message)
        except StateVersionConflict:
            current = self._rows.get(session_id)
            if expected_version is not None and current is not None:
                return current.version  # the silent lost update the spec warns about
            raise


class StaleReturnsAdapter(MemoryBackendAdapter):
    """Returns the current version instead of raising on a version mismatch."""

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._store = _StaleReturnsStore()


class _OverwritingStore(MemoryStateStore):
    idempotent_retries = False  # it overwrites: it can claim nothing about retries

    def save(self, session_id, blob, *, expected_version, owner_subject=None,
             pending_message=None):
        if expected_version is None:
            with self._lock:
                self._rows.pop(session_id, None)  # "upsert": the insert overwrites
        return super().save(session_id, blob, expected_version=expected_version,
                            owner_subject=owner_subject, pending_message=pending_message)


class OverwritingInsertAdapter(MemoryBackendAdapter):
    """An insert onto an existing session overwrites it."""

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._store = _OverwritingStore()


class DroppingEventsAdapter(EventfulMemoryAdapter):
    """Has an event store, but commit_turn writes the state and silently drops the events."""

    fault_points = frozenset()  # its own commit_turn does not honour the seam

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        return self._store.save(session_id, blob, expected_version=expected_version,
                                owner_subject=owner_subject, pending_message=pending_message)


class SilentMemoryAdapter(MemoryBackendAdapter):
    """No event store, and commit_turn drops events instead of refusing the turn."""

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        return self._store.save(session_id, blob, expected_version=expected_version,
                                owner_subject=owner_subject, pending_message=pending_message)


class NoOwnerCheckAdapter(EventfulMemoryAdapter):
    """commit_turn checks the version but not the owner (the engine's Redis script bug)."""

    fault_points = frozenset()  # its own commit_turn does not honour the seam

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        checked = validate_turn_events(events)
        store = self._store
        with self._turn_lock, store._lock:
            current = store._rows.get(session_id)
            if expected_version is None:
                if current is not None:
                    raise StateVersionConflict("exists")
                version = 1
            else:
                if current is None or current.version != expected_version:
                    raise StateVersionConflict("version moved")
                version = expected_version + 1
            store._rows[session_id] = _Row(bytes(blob), version, owner_subject,
                                           pending_message or None)
            for event in checked:
                self._events.append(event)
            return version


class StateFirstAdapter(EventfulMemoryAdapter):
    """Writes the state, then validates and appends events one by one (no rollback)."""

    fault_points = frozenset()  # its own commit_turn does not honour the seam

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        version = self._store.save(session_id, blob, expected_version=expected_version,
                                   owner_subject=owner_subject, pending_message=pending_message)
        for event in events or ():
            self._events.append(event)  # validates each event only now
        return version


class _RacyStore(MemoryStateStore):
    """Check-then-write without a lock, with a pause in between: a lost-update factory."""

    def save(self, session_id, blob, *, expected_version, owner_subject=None,
             pending_message=None):
        current = self._rows.get(session_id)
        if expected_version is None:
            if current is not None:
                raise StateVersionConflict("exists")
            version = 1
        else:
            if current is None or current.version != expected_version:
                raise StateVersionConflict("moved")
            version = expected_version + 1
        time.sleep(0.002)
        self._rows[session_id] = _Row(bytes(blob), version, owner_subject, pending_message or None)
        return version


class RacyAdapter(MemoryBackendAdapter):
    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._store = _RacyStore()


class FreshStoreAdapter(MemoryBackendAdapter):
    """state_store() hands out a new store per call."""

    def state_store(self) -> MemoryStateStore:
        fresh = MemoryStateStore()
        fresh._rows = self._store._rows
        fresh._lock = self._store._lock
        return fresh


class PropertyPersistenceAdapter(MemoryBackendAdapter):
    """is_persistent computed per instance instead of declared on the class."""

    @property  # type: ignore[override]
    def is_persistent(self) -> bool:  # noqa: D401
        return False


class RaisingHealthAdapter(MemoryBackendAdapter):
    def check_health(self) -> bool:
        raise ConnectionError("store down")


class TruthyHealthAdapter(MemoryBackendAdapter):
    def check_health(self):  # returns 1, not True
        return 1


class BoolVersionAdapter(MemoryBackendAdapter):
    """commit_turn returns True instead of the new version."""

    def commit_turn(self, *args, **kwargs):
        super().commit_turn(*args, **kwargs)
        return True


class _StickyDeleteStore(MemoryStateStore):
    def delete(self, session_id, *, owner_subject=UNSCOPED):
        return self._get(session_id, owner_subject) is not None  # says yes, deletes nothing


class StickyDeleteAdapter(MemoryBackendAdapter):
    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._store = _StickyDeleteStore()


class IgnoresOwnerFilterAdapter(MemoryBackendAdapter):
    """load_full ignores the owner filter (returns any row)."""

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        store = self._store
        original = store.load_full

        def load_full(session_id, *, owner_subject=UNSCOPED):
            return original(session_id)

        store.load_full = load_full  # type: ignore[method-assign]


class GappyEventsAdapter(EventfulMemoryAdapter):
    """Draws a sequence number before the compare-and-set, so a refused turn leaves a gap."""

    fault_points = frozenset()  # its own commit_turn does not honour the seam

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        checked = validate_turn_events(events)
        with self._turn_lock, self._events._lock:
            for event in checked:
                self._events._counters[event.user_id] = self._events._counters.get(
                    event.user_id, 0) + 1
            base = {e.user_id: self._events._counters[e.user_id] - sum(
                1 for x in checked if x.user_id == e.user_id) for e in checked}
            version = self._store.save(session_id, blob, expected_version=expected_version,
                                       owner_subject=owner_subject,
                                       pending_message=pending_message)
            for event in checked:
                base[event.user_id] += 1
                stored = replace(event, sequence=base[event.user_id])
                self._events._by_user.setdefault(event.user_id, []).append(stored)
                self._events._by_id[event.event_id] = stored
            return version


class InclusiveDeleteEventStore(InMemoryEventStore):
    def delete_older_than(self, cutoff, *, user_id=None):
        return super().delete_older_than(cutoff.replace(microsecond=1) if cutoff.microsecond == 0
                                         else cutoff, user_id=user_id)


class InclusiveDeleteAdapter(EventfulMemoryAdapter):
    """delete_older_than also deletes events exactly at the cutoff."""

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._events = InclusiveDeleteEventStore()


class RefusesAfterWritingAdapter(EventfulMemoryAdapter):
    """Claims the deployment cannot do turns with events, but only after saving the state."""

    fault_points = frozenset()  # its own commit_turn does not honour the seam

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        from backends.errors import UnsupportedOperation

        version = self._store.save(session_id, blob, expected_version=expected_version,
                                   owner_subject=owner_subject, pending_message=pending_message)
        if events:
            raise UnsupportedOperation("no transactions here")
        return version


class RefusesEventTurnsAdapter(EventfulMemoryAdapter):
    """A deployment that refuses turns with events up front (a standalone MongoDB)."""

    fault_points = frozenset()  # its own commit_turn does not honour the seam

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        from backends.errors import UnsupportedOperation

        if events:
            raise UnsupportedOperation("this deployment cannot write a turn with events")
        return super().commit_turn(session_id, blob, expected_version=expected_version,
                                   owner_subject=owner_subject, pending_message=pending_message)


class _AnonymousAsNoneStore(MemoryStateStore):
    def save(self, session_id, blob, *, expected_version, owner_subject=None,
             pending_message=None):
        if owner_subject == "__anonymous__":
            owner_subject = None  # "anonymous means nobody": wrong, it is an owner string
        return super().save(session_id, blob, expected_version=expected_version,
                            owner_subject=owner_subject, pending_message=pending_message)


class AnonymousAsNoneAdapter(MemoryBackendAdapter):
    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._store = _AnonymousAsNoneStore()


class LosesStateOnReopenAdapter(EventfulMemoryAdapter):
    """Declares itself persistent, but each instance starts empty (a cache mistaken for
    a store): everything is lost on restart."""

    name = "forgetful"
    is_persistent = True


class HalfWritingTurnAdapter(EventfulMemoryAdapter):
    """When a fault strikes after the state write, the state stays and the events are
    lost (no transaction around the turn)."""

    def _undo(self, session_id, previous):
        return None


class _IdempotentStore(MemoryStateStore):
    """Answers a retried write whose exact result is already stored with that version."""

    idempotent_retries = True

    def save(self, session_id, blob, *, expected_version, owner_subject=None,
             pending_message=None):
        try:
            return super().save(session_id, blob, expected_version=expected_version,
                                owner_subject=owner_subject, pending_message=pending_message)
        except StateVersionConflict:
            row = self._rows.get(session_id)
            produced = 1 if expected_version is None else expected_version + 1
            if row is not None and row == _Row(bytes(blob), produced, owner_subject,
                                               pending_message or None):
                return produced
            raise


class IdempotentRetryAdapter(MemoryBackendAdapter):
    """A correct store that declares idempotent_retries = True."""

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._store = _IdempotentStore()


class _ClaimsIdempotenceStore(MemoryStateStore):
    idempotent_retries = True  # declared, not done: a retry still comes back a conflict

    def save(self, session_id, blob, *, expected_version, owner_subject=None,
             pending_message=None):
        current = self._rows.get(session_id)
        produced = 1 if expected_version is None else expected_version + 1
        if current is not None and current.version == produced:
            raise StateVersionConflict(f"session {session_id!r} has moved")
        return super().save(session_id, blob, expected_version=expected_version,
                            owner_subject=owner_subject, pending_message=pending_message)


class ClaimsIdempotenceAdapter(MemoryBackendAdapter):
    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._store = _ClaimsIdempotenceStore()


class _IgnoresDeleteVersionStore(MemoryStateStore):
    def delete(self, session_id, *, owner_subject=UNSCOPED, expected_version=None):
        return super().delete(session_id, owner_subject=owner_subject)


class IgnoresDeleteVersionAdapter(MemoryBackendAdapter):
    """delete(expected_version=) accepted and ignored: a moved session is deleted."""

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._store = _IgnoresDeleteVersionStore()


class LimitBeforeFilterEventStore(InMemoryEventStore):
    def list_events(self, user_id, *, owner_subject=UNSCOPED, after_sequence=0, limit=None):
        first = super().list_events(user_id, after_sequence=after_sequence, limit=limit)
        return [e for e in first if owner_matches(e.owner_subject, owner_subject)]


class LimitBeforeFilterAdapter(EventfulMemoryAdapter):
    """list_events takes the first n events, then filters them by owner."""

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._events = LimitBeforeFilterEventStore()


class AcceptsNanAdapter(EventfulMemoryAdapter):
    """Stores events whose embeddings hold NaN, as the engine does (beyond the contract)."""

    fault_points = frozenset()

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        with self._turn_lock, self._events._lock:
            version = self._store.save(session_id, blob, expected_version=expected_version,
                                       owner_subject=owner_subject,
                                       pending_message=pending_message)
            for event in events or ():
                self._events._append_validated(replace(
                    validate_event(replace(event, embedding=[0.0])),
                    embedding=tuple(event.embedding)))
            return version


# ---------------------------------------------------------------------------------------
# Engine-like behaviour where it matters: no sequences (the engine's SQL event store), a
# turn that leaves an unindexed event behind (the engine's non-atomic Redis commit_turn).
# ---------------------------------------------------------------------------------------


class SequencelessEventStore(InMemoryEventStore):
    """Like the engine's SQL event store (ENGINE-WIRE §5, §7): no sequence is ever
    assigned (every event reads back with sequence 0), listings are newest first (ties in
    reverse insertion order), and nothing is declared: the suite must see it."""

    def _append_validated(self, event: MemoryEvent) -> MemoryEvent:
        if event.event_id in self._by_id:
            raise ValueError(f"event id {event.event_id!r} exists")
        stored = event.with_sequence(0)
        self._by_user.setdefault(event.user_id, []).append(stored)
        self._by_id[event.event_id] = stored
        return stored

    def list_events(self, user_id, *, owner_subject=UNSCOPED, after_sequence=0, limit=None):
        validate_owner_filter(owner_subject)
        with self._lock:
            found = [e for e in reversed(self._by_user.get(user_id, []))
                     if owner_matches(e.owner_subject, owner_subject)]
        found.sort(key=lambda e: e.created_at, reverse=True)  # stable: ties stay reversed
        return found[:limit] if limit is not None else found


class SequencelessAdapter(EventfulMemoryAdapter):
    """A correct adapter over :class:`SequencelessEventStore` (our event surface)."""

    name = "sequenceless"

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._events = SequencelessEventStore()


class EngineSurfaceEvents:
    """The engine's event surface (``get``, ``list_by_user``, ``count_for_user``,
    ``query_by_user``, ``delete``, ``delete_by_user``, ``delete_older_than(user_id,
    cutoff)``) over an in-memory store, as the engine's SQL event store offers it: only
    these calls, no owner filter, no declaration."""

    def __init__(self, inner: InMemoryEventStore) -> None:
        self._inner = inner
        self._lock = inner._lock
        self._append_validated = inner._append_validated

    def append(self, event):
        return self._inner.append(event)

    def get(self, event_id):
        return self._inner.get_event(str(event_id))

    def list_by_user(self, user_id):
        return self._inner.list_events(user_id)

    def count_for_user(self, user_id):
        return len(self._inner.list_events(user_id))

    def query_by_user(self, user_id, *, query_embedding, limit):
        import math

        events = self._inner.list_events(user_id)
        if query_embedding is None:
            return sorted(events, key=lambda e: e.created_at, reverse=True)[:limit]

        def cosine(e):
            a, b = list(e.embedding or ()), list(query_embedding)
            n = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
            return sum(x * y for x, y in zip(a, b)) / n if n else 0.0

        return sorted(events, key=cosine, reverse=True)[:limit]

    def delete(self, event_id):
        with self._lock:
            found = self._inner._by_id.pop(str(event_id), None)
            if found is None:
                return False
            rows = self._inner._by_user.get(found.user_id, [])
            self._inner._by_user[found.user_id] = [e for e in rows
                                                    if e.event_id != found.event_id]
            return True

    def delete_by_user(self, user_id):
        return self._inner.purge_user(user_id)

    def delete_older_than(self, user_id, cutoff):
        return self._inner.delete_older_than(cutoff, user_id=user_id)

    def is_empty(self):
        return self._inner.is_empty()


class EngineSqlStyleAdapter(EventfulMemoryAdapter):
    """The engine's SQL layout as the suite meets it: the engine's event surface, no
    sequences, newest-first listings; otherwise correct."""

    name = "engine-sql-style"

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._events = EngineSurfaceEvents(SequencelessEventStore())


class UnindexedEventTurnAdapter(EventfulMemoryAdapter):
    """Like the engine's non-atomic Redis commit_turn on a server error: the state
    advances and the turn's last event is stored by id but in no user's listing (an
    unindexed event hash), then the turn raises. Cleanup by user cannot find that event."""

    fault_points = frozenset({"turn.after_state"})

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        if self._armed and events:
            self._armed = None
            checked = validate_turn_events(events)
            version = self._store.save(session_id, blob, expected_version=expected_version,
                                       owner_subject=owner_subject,
                                       pending_message=pending_message)
            last = checked[-1].with_sequence(version)
            with self._events._lock:
                self._events._by_id[last.event_id] = last  # stored, never indexed
            raise InjectedFault("planted fault while indexing the turn's last event")
        return super().commit_turn(session_id, blob, expected_version=expected_version,
                                   owner_subject=owner_subject,
                                   pending_message=pending_message, events=events)
