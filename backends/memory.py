"""The ``memory`` backend: process-local, not persistent, no event store.

It is the default and the smallest thing that satisfies the contract, so it is also the
reference for the save/load/delete rules every other store must follow.
"""

from __future__ import annotations

import fnmatch
import hashlib
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterator, Sequence

from backends.contract import (
    LedgerEntry,
    LedgerKey,
    StoreIdentity,
    UNSCOPED,
    DerivedReads,
    LoadedState,
    MemoryEvent,
    OwnerFilter,
    SessionSummary,
    normalise_pending,
    StateStoreSeams,
    check_delete_version,
    owner_matches,
    speaks_both_conventions,
    validate_owner_filter,
    validate_save_args,
)
from backends.errors import BackendConfigError, InvalidEvent, cas_refusal, session_exists


@dataclass(frozen=True)
class _Row:
    blob: bytes
    version: int
    owner_subject: str | None
    pending_message: str | None


@speaks_both_conventions
class MemoryStateStore(DerivedReads):
    """Thread-safe dict-backed state store implementing every rule of the contract.

    A retried save whose exact result is already stored (same blob, owner and pending, at
    the version this write would have produced) returns that version: the caller cannot
    otherwise tell its own lost acknowledgement from a lost race."""

    idempotent_retries = True

    def __init__(self) -> None:
        self._rows: dict[str, _Row] = {}
        self._lock = threading.Lock()

    def save(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: str | None = None,
        pending_message: str | None = None,
    ) -> int:
        validate_save_args(session_id, blob, expected_version, owner_subject)
        row = _Row(bytes(blob), 0, owner_subject, normalise_pending(pending_message))
        with self._lock:
            current = self._rows.get(session_id)
            produced = 1 if expected_version is None else expected_version + 1
            if current == _Row(row.blob, produced, row.owner_subject, row.pending_message):
                return produced  # a retry of a write that already landed: its own success
            if expected_version is None:
                if current is not None:
                    raise session_exists(session_id)
                new_version = 1
            else:
                if current is None or current.version != expected_version or (
                        owner_subject is not None
                        and current.owner_subject not in (None, owner_subject)):
                    raise cas_refusal(session_id, current and current.version, expected_version)
                new_version = expected_version + 1
            self._rows[session_id] = _Row(row.blob, new_version, row.owner_subject, row.pending_message)
            return new_version

    def _get(self, session_id: str, owner_subject: OwnerFilter) -> _Row | None:
        validate_owner_filter(owner_subject)
        row = self._rows.get(session_id)
        if row is None or not owner_matches(row.owner_subject, owner_subject):
            return None
        return row

    def load_full(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> LoadedState | None:
        return self._read_full(session_id, owner_subject)

    def _read_full(self, session_id: str, owner_subject: OwnerFilter) -> LoadedState | None:
        row = self._get(session_id, owner_subject)
        if row is None:
            return None
        return LoadedState(row.blob, row.version, row.owner_subject, row.pending_message)

    def delete(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
               expected_version: int | None = None) -> bool:
        with self._lock:
            row = self._get(session_id, owner_subject)
            if row is None:
                return False
            check_delete_version(session_id, row.version, expected_version)
            del self._rows[session_id]
            return True

    # -- operator seams -------------------------------------------------------------

    def restore_session(
        self,
        session_id: str,
        blob: bytes,
        *,
        version: int,
        owner_subject: str | None = None,
        pending_message: str | None = None,
        ttl_seconds: int | None = None,
    ) -> None:
        validate_save_args(session_id, blob, version, owner_subject)
        with self._lock:
            if session_id in self._rows:
                raise session_exists(session_id)
            self._rows[session_id] = _Row(bytes(blob), version, owner_subject,
                                          normalise_pending(pending_message))

    def iter_sessions(
        self,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        match: str | None = None,
        batch_size: int = 500,
    ) -> Iterator[SessionSummary]:
        validate_owner_filter(owner_subject)
        with self._lock:
            ids = sorted(self._rows)
        for session_id in ids:
            if match is not None and not fnmatch.fnmatchcase(session_id, match):
                continue
            summary = self.describe_session(session_id, owner_subject=owner_subject)
            if summary is not None:
                yield summary

    def count_sessions(self, *, owner_subject: OwnerFilter = UNSCOPED,
                       match: str | None = None) -> int:
        validate_owner_filter(owner_subject)
        with self._lock:
            ids = list(self._rows)
        return sum(1 for sid in ids
                   if (match is None or fnmatch.fnmatchcase(sid, match))
                   and self._get(sid, owner_subject) is not None)

    def describe_session(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> SessionSummary | None:
        row = self._get(session_id, owner_subject)
        if row is None:
            return None
        return SessionSummary(
            session_id=session_id,
            version=row.version,
            owner_subject=row.owner_subject,
            pending_message=row.pending_message,
            blob_size=len(row.blob),
            blob_sha256=hashlib.sha256(row.blob).hexdigest(),
        )


class MemoryLedger:
    """The erasure ledger of a process-local store: two dicts, gone with the process; its
    clock is the process's."""

    def __init__(self) -> None:
        self._keys: dict[str, LedgerKey] = {}
        self._entries: dict[tuple[str, str], LedgerEntry] = {}
        self._seq = 0
        self._identity: StoreIdentity | None = None
        self._lock = threading.Lock()

    def keys(self) -> list[LedgerKey]:
        return list(self._keys.values())

    def add_key(self, key: LedgerKey) -> LedgerKey:
        if key.own:
            for held in self._keys.values():
                if held.own:
                    return held
        return self._keys.setdefault(key.key_id, key)

    def entries(self) -> list[LedgerEntry]:
        return list(self._entries.values())

    def add_entries(self, entries: Sequence[LedgerEntry]) -> None:
        from backends.contract.ledger import merged

        with self._lock:
            for entry in entries:
                place = (entry.key_id, entry.digest)
                held = self._entries.get(place)
                kept = merged(held, entry)
                if kept is None:
                    continue
                if held is None:
                    self._seq += 1
                    kept = kept._replace(seq=self._seq)
                self._entries[place] = kept

    def identity(self, *, create: bool = True) -> StoreIdentity | None:
        from backends.contract.ledger import new_identity

        with self._lock:
            if self._identity is None and create:
                self._identity = new_identity(self.now())
            return self._identity

    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def emptied_logs(self) -> None:
        """None: the memory backend keeps no event log."""
        return None


@speaks_both_conventions
class MemoryBackendAdapter(StateStoreSeams):
    """Process-local adapter. Refuses events rather than dropping them: it keeps no log."""

    name = "memory"
    is_persistent = False

    def __init__(self, uri: str | None = None) -> None:
        if uri not in (None, "", "memory://", "memory:"):
            raise BackendConfigError("the memory backend takes no location: use 'memory://'")
        self._store = MemoryStateStore()
        self._ledger = MemoryLedger()

    def state_store(self) -> MemoryStateStore:
        return self._store

    def erasure_ledger(self) -> MemoryLedger:
        return self._ledger

    def event_store(self) -> None:
        return None

    def retrieval_backend(self) -> None:
        return None

    def commit_turn(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: str | None = None,
        pending_message: str | None = None,
        events: Sequence[MemoryEvent] | None = None,
    ) -> int:
        if events:
            raise InvalidEvent(
                "the memory backend keeps no event log; refusing a turn with events "
                "instead of dropping them (select a backend with an event store)"
            )
        return self._store.save(
            session_id,
            blob,
            expected_version=expected_version,
            owner_subject=owner_subject,
            pending_message=pending_message,
        )

    def check_health(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release; idempotent."""
