"""Test-only adapters for ``sessions export/import/copy`` (loaded with ``--adapter``).

``--adapter`` builds a new adapter per invocation, so state that must outlive one
(a pre-filled memory store, a mongomock database) lives in this module; a test sets it
up and points the CLI here. MongoDB is ``mongomock`` (no real MongoDB on our machines).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

from backends.contract import (
    UNSCOPED,
    EngineEventSurface,
    MemoryEvent,
    SessionSummary,
    owner_matches,
    validate_event,
    validate_turn_events,
)
from backends.errors import StateVersionConflict
from backends.memory import MemoryBackendAdapter, MemoryStateStore

#: the shared memory store behind ``memory_shared``
MEMORY: dict[str, MemoryBackendAdapter] = {"current": MemoryBackendAdapter()}
#: (mongomock client, database name) behind ``mongo_shared``
MONGO: dict[str, Any] = {}


class _Unclosing:
    """Delegates to an adapter but ignores close(), so the store outlives the command."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name = inner.name
        self.is_persistent = inner.is_persistent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def close(self) -> None:
        pass


def memory_shared() -> MemoryBackendAdapter:
    """The module's memory store (its close() is a no-op anyway)."""
    return MEMORY["current"]


def mongo_shared() -> Any:
    from backends.mongo import MongoBackendAdapter

    client, database = MONGO["client"], MONGO["database"]
    return MongoBackendAdapter(client=client, database=database, item_sync=True)


class NoRestoreAdapter:
    """A store that cannot restore versions (no restore_session): imports fall back to
    save(expected_version=None), i.e. version 1."""

    name = "norestore"
    is_persistent = False

    def __init__(self, inner: MemoryBackendAdapter) -> None:
        self._inner = inner

    def state_store(self):
        return self._inner.state_store()

    def event_store(self):
        return None

    def retrieval_backend(self):
        return None

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        return self._inner.commit_turn(session_id, blob, expected_version=expected_version,
                                       owner_subject=owner_subject, pending_message=pending_message,
                                       events=events)

    def check_health(self) -> bool:
        return True

    def iter_sessions(self, **kwargs) -> Iterator[SessionSummary]:
        return self._inner.iter_sessions(**kwargs)

    def describe_session(self, session_id, **kwargs):
        return self._inner.describe_session(session_id, **kwargs)

    def close(self) -> None:
        pass


def norestore_shared() -> NoRestoreAdapter:
    return NoRestoreAdapter(MEMORY["current"])


class Interrupting(MemoryBackendAdapter):
    """Enumerates ``after`` sessions, then raises ``exc`` (KeyboardInterrupt by default):
    an export interrupted half-way."""

    def __init__(self, source: MemoryBackendAdapter, after: int,
                 exc: BaseException | None = None) -> None:
        super().__init__()
        self._store = source.state_store()
        self._after = after
        self._exc = exc or KeyboardInterrupt()

    def iter_sessions(self, *, owner_subject=UNSCOPED, match=None, batch_size=500):
        for i, summary in enumerate(self._store.iter_sessions(owner_subject=owner_subject,
                                                              match=match)):
            if i == self._after:
                raise self._exc
            yield summary


INTERRUPT: dict[str, Any] = {}


def interrupting_shared() -> Interrupting:
    return Interrupting(MEMORY["current"], INTERRUPT.get("after", 2), INTERRUPT.get("exc"))


class Repeating(MemoryBackendAdapter):
    """Enumerates some sessions twice, like Redis SCAN during a rehash."""

    def __init__(self, source: MemoryBackendAdapter, repeat: set[str]) -> None:
        super().__init__()
        self._store = source.state_store()
        self._repeat = repeat

    def iter_sessions(self, *, owner_subject=UNSCOPED, match=None, batch_size=500):
        again = []
        for summary in self._store.iter_sessions(owner_subject=owner_subject, match=match):
            yield summary
            if summary.session_id in self._repeat:
                again.append(summary)
        yield from again


# -- archive v2: stores with every optional seam, and stores that lack one --------------------
#
# The shipped stores gain EventRestorer / session_subjects / set_drift_exempt on other
# branches; these doubles let the archive v2 code be tested against the contract alone.

class _Log(EngineEventSurface):
    """A per-user, gap-free event log without the optional seams."""

    assigns_sequences = True

    def __init__(self) -> None:
        self._events: dict[str, MemoryEvent] = {}
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()

    def append(self, event: Any) -> MemoryEvent:
        event = validate_event(event)
        with self._lock:
            if event.event_id in self._events:
                raise StateVersionConflict(f"event {event.event_id} already exists")
            seq = self._counters.get(event.user_id, 0) + 1
            self._counters[event.user_id] = seq
            stored = event.with_sequence(seq)
            self._events[event.event_id] = stored
            return self._shown(stored)

    def _shown(self, event: MemoryEvent) -> MemoryEvent:
        return event if self.assigns_sequences else event.with_sequence(0)

    def list_events(self, user_id: str, *, owner_subject: Any = UNSCOPED, after_sequence: int = 0,
                    limit: int | None = None) -> list[MemoryEvent]:
        with self._lock:
            found = sorted((e for e in self._events.values() if e.user_id == user_id
                            and e.sequence > after_sequence
                            and (owner_subject is UNSCOPED or owner_matches(e.owner_subject, owner_subject))),
                           key=lambda e: e.sequence)
        found = [self._shown(e) for e in found]
        return found if limit is None else found[:limit]

    def get_event(self, event_id: str, *, owner_subject: Any = UNSCOPED) -> MemoryEvent | None:
        event = self._events.get(str(event_id))
        if event is None or (owner_subject is not UNSCOPED
                             and not owner_matches(event.owner_subject, owner_subject)):
            return None
        return self._shown(event)

    def delete_event(self, event_id: str) -> bool:
        with self._lock:
            return self._events.pop(str(event_id), None) is not None

    def purge_user(self, user_id: str) -> int:
        with self._lock:
            ids = [k for k, e in self._events.items() if e.user_id == user_id]
            for k in ids:
                del self._events[k]
            self._counters.pop(user_id, None)
            return len(ids)

    def delete_events_before(self, cutoff: datetime, *, user_id: str | None = None) -> int:
        with self._lock:
            ids = [k for k, e in self._events.items() if e.created_at < cutoff
                   and (user_id is None or e.user_id == user_id)]
            for k in ids:
                del self._events[k]
            return len(ids)


class _RestorableLog(_Log):
    """EventRestorer: restore with sequence numbers, read and raise the counter."""

    def restore_events(self, events: Any) -> int:
        checked = [dataclasses.replace(validate_event(dataclasses.replace(e, sequence=0)),
                                       sequence=e.sequence) for e in events]
        with self._lock:
            taken = {(e.user_id, e.sequence) for e in self._events.values() if e.sequence}
            for event in checked:  # all checked before the first write
                if event.event_id in self._events:
                    raise StateVersionConflict(f"event {event.event_id} already exists")
                if event.sequence and (event.user_id, event.sequence) in taken:
                    raise StateVersionConflict(f"sequence {event.sequence} of {event.user_id!r} is taken")
            for event in checked:
                self._events[event.event_id] = event
            return len(checked)

    def read_counter(self, user_id: str) -> int:
        return self._counters.get(user_id, 0)

    def raise_counter(self, user_id: str, value: int) -> int:
        with self._lock:
            self._counters[user_id] = max(self._counters.get(user_id, 0), int(value))
            return self._counters[user_id]


class LogDouble(_RestorableLog):
    """Every optional event-store seam, including the engine's ``session_subjects``."""

    def session_subjects(self, session_id: str) -> list[str]:
        return sorted({e.user_id for e in self._events.values() if e.session_id == session_id})


class SubjectlessLog(_RestorableLog):
    """Restores events, but cannot say which users a session's events belong to."""


class AppendOnlyLog(_Log):
    """Can find a session's events but not restore them with their numbers."""

    def session_subjects(self, session_id: str) -> list[str]:
        return LogDouble.session_subjects(self, session_id)  # type: ignore[arg-type]


class SequencelessLog(LogDouble):
    """Keeps events but not their per-user sequence numbers (like the engine's SQL table)."""

    assigns_sequences = False


class NumberlessLog(_Log):
    """Keeps no sequence numbers and has no restore seam, only ``append`` (the engine's SQL
    layout, and pgvector on it): events are restored by appending them, numbers lost."""

    assigns_sequences = False

    def session_subjects(self, session_id: str) -> list[str]:
        return LogDouble.session_subjects(self, session_id)  # type: ignore[arg-type]


class SeamedStateStore(MemoryStateStore):
    """A memory state store that also keeps drift-exempt flags and per-session expiry."""

    def __init__(self) -> None:
        super().__init__()
        self._drift: set[str] = set()
        self._expiry: dict[str, datetime] = {}

    def set_drift_exempt(self, session_id: str, exempt: bool) -> None:
        if self.current_version(session_id) is None:
            return
        (self._drift.add if exempt else self._drift.discard)(session_id)

    def is_drift_exempt(self, session_id: str) -> bool:
        return session_id in self._drift and self.current_version(session_id) is not None

    def expire_in(self, session_id: str, seconds: int) -> None:
        self._expiry[session_id] = datetime.now(timezone.utc) + timedelta(seconds=seconds)

    def restore_session(self, session_id: str, blob: bytes, *, version: int,
                        owner_subject: str | None = None, pending_message: str | None = None,
                        ttl_seconds: int | None = None) -> None:
        super().restore_session(session_id, blob, version=version, owner_subject=owner_subject,
                                pending_message=pending_message)
        if ttl_seconds:
            self.expire_in(session_id, ttl_seconds)

    def describe_session(self, session_id: str, *, owner_subject: Any = UNSCOPED) -> SessionSummary | None:
        summary = super().describe_session(session_id, owner_subject=owner_subject)
        if summary is None or session_id not in self._expiry:
            return summary
        left = (self._expiry[session_id] - datetime.now(timezone.utc)).total_seconds()
        return dataclasses.replace(summary, ttl_seconds=max(0, math.ceil(left)))


class SeamedAdapter(MemoryBackendAdapter):
    """A memory adapter with an event log and (by default) every seam an archive v2
    transfer uses. ``log`` picks which event seams exist; ``drift=False`` leaves the
    drift flags out."""

    name = "seamed"
    keeps_session_ttl = True

    def __init__(self, log: Any = None, *, drift: bool = True) -> None:
        super().__init__()
        self._store = SeamedStateStore() if drift else MemoryStateStore()
        self._log = log if log is not None else LogDouble()

    def event_store(self) -> Any:
        return self._log

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        checked = validate_turn_events(events)
        version = self._store.save(session_id, blob, expected_version=expected_version,
                                   owner_subject=owner_subject, pending_message=pending_message)
        for event in checked:
            self._log.append(event)
        return version


#: adapters the CLI loads with --adapter / --from-adapter / --to-adapter
SEAMED: dict[str, Any] = {}


def seamed_source() -> SeamedAdapter:
    return SEAMED["source"]


def seamed_target() -> SeamedAdapter:
    return SEAMED["target"]


class _ClockStore(MemoryStateStore):
    """A memory state store that says it records write times (as SQL and MongoDB do) but
    whose restore_session cannot take one (no ``updated_at``)."""

    records_write_time = True


class ClockWithoutRestore(MemoryBackendAdapter):
    """A target whose sessions have an idle clock an import could not restore."""

    name = "clocked"

    def __init__(self) -> None:
        super().__init__()
        self._store = _ClockStore()
