"""Doubles for the cross-process, kill, connection and isolation cases.

``SharedFileAdapter`` is a correct, persistent adapter that several processes can share:
the in-memory stores of ``EventfulMemoryAdapter``, loaded from one pickle file at the
start of every operation and replaced (temp file + rename) at the end of a write, under
an exclusive ``flock`` (which also excludes other instances in the same process). Built
from ``SharedFileAdapter(path=...)``, so a child process rebuilds it from a recipe.

The broken ones each break one rule that only the new cases can see, and pass every older
case (tests/backends/conformance/test_cross_process_groups.py checks both):

* ``ProcessLockAdapter`` serialises with a process-local lock only (forks across
  processes: ``concurrency.processes``);
* ``TwoCallsAdapter`` writes a turn's state and its events in two calls
  (``durability.sigkill``);
* ``TwoStatementsAdapter`` writes a new blob and its version in two statements
  (``durability.sigkill``);
* ``EmptyOwnerUnfilteredAdapter`` reads owner ``""`` as "no filter", and user id ``""``
  as "every user" (``isolation.empty_values``);
* ``CaseFoldedOwnerAdapter`` compares owners case-insensitively (``isolation.owner_variants``).

``BlindRetryRedisAdapter`` (the shipped Redis adapter, retrying a turn blindly after a
connection error: ``faults.connection``) needs a Redis and lives here too.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import inspect
import os
import pickle
import threading
import time
from typing import Any, Iterator

from backends.contract import UNSCOPED, validate_turn_events
from backends.memory import MemoryStateStore, _Row
from backends.contract.owner import owner_matches
from tests.support.conformance_doubles import EventfulMemoryAdapter, InMemoryEventStore

_READS = ("load", "get", "list", "current", "iter", "describe", "count", "query", "is_")


class _SharedFile:
    """The file behind every instance; ``hold`` is one operation on it."""

    cross_process = True

    def __init__(self, path: str, store: Any, events: Any) -> None:
        self.path, self.store, self.events = path, store, events
        self._rlock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @contextlib.contextmanager
    def hold(self, write: bool) -> Iterator[None]:
        with self._rlock:
            outer = self._depth == 0
            if outer:
                if self.cross_process:
                    self._fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
                    fcntl.flock(self._fd, fcntl.LOCK_EX)
                self._load()
            self._depth += 1
            try:
                yield
                if write and outer:
                    self.flush()
            finally:
                self._depth -= 1
                if outer and self._fd is not None:
                    os.close(self._fd)  # releases the flock
                    self._fd = None

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                rows, by_user, counters, by_id = pickle.load(handle)
        except FileNotFoundError:
            rows, by_user, counters, by_id = {}, {}, {}, {}
        self.store._rows = rows
        self.events._by_user, self.events._counters, self.events._by_id = (
            by_user, counters, by_id)

    def flush(self) -> None:
        tmp = f"{self.path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as handle:
            pickle.dump((self.store._rows, self.events._by_user, self.events._counters,
                         self.events._by_id), handle)
        os.replace(tmp, self.path)


class _ProcessLocalFile(_SharedFile):
    cross_process = False  # a threading lock only: other processes are not excluded


def _synced(cls: type, base: type) -> type:
    """Wrap every public method of ``base`` in one ``hold`` of the shared file."""
    for name, member in inspect.getmembers(base, inspect.isfunction):
        if name.startswith("_") or name in cls.__dict__:
            continue
        write = not name.startswith(_READS)

        def wrapper(self, *args, __member=member, __write=write, **kwargs):
            with self._shared.hold(__write):
                result = __member(self, *args, **kwargs)
                if inspect.isgenerator(result):
                    result = iter(list(result))
                return result

        setattr(cls, name, functools.wraps(member)(wrapper))
    return cls


class SharedStateStore(MemoryStateStore):
    _shared: _SharedFile


class SharedEventStore(InMemoryEventStore):
    _shared: _SharedFile


_synced(SharedStateStore, MemoryStateStore)
_synced(SharedEventStore, InMemoryEventStore)


class SharedFileAdapter(EventfulMemoryAdapter):
    """Correct, persistent, shared by every process that opens ``path``."""

    name = "shared-file"
    is_persistent = True
    _file_class = _SharedFile

    def __init__(self, path: str, uri: str | None = None) -> None:
        super().__init__(uri)
        self.path = path
        self._store = self._store_class()
        self._events = SharedEventStore()
        self._shared = self._file_class(path, self._store, self._events)
        self._store._shared = self._events._shared = self._shared

    _store_class = SharedStateStore

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        with self._shared.hold(True):
            return super().commit_turn(session_id, blob, expected_version=expected_version,
                                       owner_subject=owner_subject,
                                       pending_message=pending_message, events=events)


def recipe_for(adapter_class: type, path: str) -> Any:
    from backends.conformance.children import AdapterRecipe

    return AdapterRecipe(f"{adapter_class.__module__}:{adapter_class.__qualname__}",
                         {"path": path})


# -- broken: process-local lock ---------------------------------------------------------------


class _SlowSaveStore(SharedStateStore):
    def save(self, session_id, blob, *, expected_version, owner_subject=None,
             pending_message=None):
        with self._shared.hold(True):
            time.sleep(0.003)  # a slow write: the window another process falls into
            return MemoryStateStore.save(self, session_id, blob,
                                         expected_version=expected_version,
                                         owner_subject=owner_subject,
                                         pending_message=pending_message)


class ProcessLockAdapter(SharedFileAdapter):
    """Reads, checks and writes under a threading lock: one winner per version within a
    process, two across processes."""

    name = "process-lock"
    _file_class = _ProcessLocalFile
    _store_class = _SlowSaveStore


# -- broken: state and events in two calls ------------------------------------------------------


class TwoCallsAdapter(SharedFileAdapter):
    """commit_turn saves the state (one write), then appends the events (a second)."""

    name = "two-calls"
    fault_points = frozenset()  # its own commit_turn does not honour the seam

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        checked = validate_turn_events(events)
        version = self._store.save(session_id, blob, expected_version=expected_version,
                                   owner_subject=owner_subject, pending_message=pending_message)
        time.sleep(0.005)  # whatever runs between the two calls
        with self._shared.hold(True):
            for event in checked:
                self._events._append_validated(event)
        return version


# -- broken: blob and version in two statements ---------------------------------------------------


class _TwoStatementStore(SharedStateStore):
    def save(self, session_id, blob, *, expected_version, owner_subject=None,
             pending_message=None):
        with self._shared.hold(True):
            previous = self._rows.get(session_id)
            version = MemoryStateStore.save(self, session_id, blob,
                                            expected_version=expected_version,
                                            owner_subject=owner_subject,
                                            pending_message=pending_message)
            if previous is not None:
                new = self._rows[session_id]
                # UPDATE ... SET blob = ...; then UPDATE ... SET version = ...
                self._rows[session_id] = _Row(new.blob, previous.version, new.owner_subject,
                                              new.pending_message)
                self._shared.flush()
                time.sleep(0.005)
                self._rows[session_id] = new
            return version


class TwoStatementsAdapter(SharedFileAdapter):
    """A new blob and its version are written by two statements, not one."""

    name = "two-statements"
    fault_points = frozenset()  # its first statement is outside the seam's undo
    _store_class = _TwoStatementStore


# -- broken: isolation --------------------------------------------------------------------------------


class _EmptyOwnerStore(MemoryStateStore):
    def _get(self, session_id, owner_subject):
        if owner_subject == "":
            owner_subject = UNSCOPED  # the bug: "no owner given" read as "no filter"
        return super()._get(session_id, owner_subject)


class _EmptyOwnerEvents(InMemoryEventStore):
    def list_events(self, user_id, *, owner_subject=UNSCOPED, after_sequence=0, limit=None):
        if owner_subject == "":
            owner_subject = UNSCOPED
        if user_id == "":  # ADK's Redis bug: an empty user id lists everyone's events
            with self._lock:
                found = [e for events in self._by_user.values() for e in events
                         if owner_matches(e.owner_subject, owner_subject)]
            return found[:limit] if limit is not None else found
        return super().list_events(user_id, owner_subject=owner_subject,
                                   after_sequence=after_sequence, limit=limit)

    def get_event(self, event_id, *, owner_subject=UNSCOPED):
        if owner_subject == "":
            owner_subject = UNSCOPED
        return super().get_event(event_id, owner_subject=owner_subject)


class EmptyOwnerUnfilteredAdapter(EventfulMemoryAdapter):
    """Owner "" is "no filter", user id "" is "every user"."""

    name = "empty-owner-unfiltered"

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._store = _EmptyOwnerStore()
        self._events = _EmptyOwnerEvents()


def _folded_matches(stored: Any, wanted: Any) -> bool:
    if wanted is UNSCOPED or wanted is None:
        return owner_matches(stored, wanted)
    return bool(stored) and str(stored).casefold() == str(wanted).casefold()


class _FoldedStore(MemoryStateStore):
    def _get(self, session_id, owner_subject):
        if owner_subject is UNSCOPED or owner_subject is None:
            return super()._get(session_id, owner_subject)
        row = self._rows.get(session_id)
        return row if row is not None and _folded_matches(row.owner_subject, owner_subject) \
            else None


class _FoldedEvents(InMemoryEventStore):
    def list_events(self, user_id, *, owner_subject=UNSCOPED, after_sequence=0, limit=None):
        if owner_subject is UNSCOPED or owner_subject is None:
            return super().list_events(user_id, owner_subject=owner_subject,
                                       after_sequence=after_sequence, limit=limit)
        with self._lock:
            found = [e for e in self._by_user.get(user_id, []) if e.sequence > after_sequence
                     and _folded_matches(e.owner_subject, owner_subject)]
        return found[:limit] if limit is not None else found


class CaseFoldedOwnerAdapter(EventfulMemoryAdapter):
    """Owners compared case-insensitively ("ACME" reads acme's rows)."""

    name = "case-folded-owner"

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._store = _FoldedStore()
        self._events = _FoldedEvents()


# -- broken: a blind retry after a lost reply ---------------------------------------------------------


def _blind_retry_adapter_class() -> type:
    from dataclasses import replace as _replace
    import uuid

    from backends.errors import BackendTransient, BackendUnreachable
    from backends.redis import RedisBackendAdapter

    class BlindRetryRedisAdapter(RedisBackendAdapter):
        """The shipped Redis adapter, except that a turn failing on a connection error is
        built again and resent at whatever version the session now has."""

        name = "redis"  # selected as redis; only its commit_turn differs

        @property
        def fault_points(self) -> frozenset[str]:
            return frozenset()  # the seam would cut before the reply; the bug is after

        def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                        pending_message=None, events=None):
            try:
                return super().commit_turn(session_id, blob, expected_version=expected_version,
                                           owner_subject=owner_subject,
                                           pending_message=pending_message, events=events)
            except (BackendUnreachable, BackendTransient, ConnectionError, OSError):
                current = self.state_store().current_version(session_id)
                again = [_replace(e, event_id=uuid.uuid4()) for e in events or ()]
                return super().commit_turn(session_id, blob, expected_version=current,
                                           owner_subject=owner_subject,
                                           pending_message=pending_message,
                                           events=again or None)

    return BlindRetryRedisAdapter


def BlindRetryRedisAdapter(uri: str, **options: Any) -> Any:  # noqa: N802 - a class factory
    """A blind-retry Redis adapter (the class is built on first use: redis is optional)."""
    return _blind_retry_adapter_class()(uri, **options)


# -- a connection pool opened by the factory (issue 42) -------------------------------------------

#: the module-level "pool": one connection, opened by the first adapter built in a process
#: and never closed by close(), as a module-level SQLAlchemy engine keeps its connection
_POOL: list[Any] = []
#: ids of the adapters that deleted a session in this process (which one cleaned up)
DELETED_BY: list[int] = []


def _pool(address: str) -> Any:
    import socket

    if not _POOL:
        host, port = address.rsplit(":", 1)
        _POOL.append(socket.create_connection((host, int(port)), timeout=5))
    return _POOL[0]


class PooledAtFactoryAdapter(SharedFileAdapter):
    """Correct in one process, but the factory opens a pooled connection (to ``pool``, a
    ``host:port`` listener) that outlives ``close()``: a fork would share it."""

    name = "pooled-at-factory"

    def __init__(self, path: str, pool: str, uri: str | None = None) -> None:
        super().__init__(path, uri)
        _pool(pool)


class _RecordingDeleteStore(SharedStateStore):
    owner_id = 0

    def delete(self, session_id, **kwargs):
        DELETED_BY.append(self.owner_id)
        return SharedStateStore.delete(self, session_id, **kwargs)


_synced(_RecordingDeleteStore, MemoryStateStore)


class RecordingCleanupAdapter(SharedFileAdapter):
    """Correct; records which instance deleted a session (the run's, or a fresh one)."""

    name = "recording-cleanup"
    _store_class = _RecordingDeleteStore

    def __init__(self, path: str, uri: str | None = None) -> None:
        super().__init__(path, uri)
        self._store.owner_id = id(self)
