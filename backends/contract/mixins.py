"""Mixins that derive one part of the contract from another, so a store or adapter
writes each behaviour once: the engine's event calls from ours, the derived state reads,
close-once, the state store's session seams on the adapter, and the engine's item eraser
over a store's own delete. Each store and adapter mixin builds on the shortcuts' base of
:mod:`backends.contract.defaults`, so every shipped one has them."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Sequence

from backends.contract.defaults import AdapterDefaults, EventStoreDefaults, StateStoreDefaults
from backends.contract.values import LoadedState, MemoryEvent, SessionSummary
from backends.contract.owner import UNSCOPED, OwnerFilter, speaks_both_conventions


class EngineEventSurface(EventStoreDefaults):
    """The engine's event-store calls (ENGINE-WIRE §2), derived from ours.

    Mix into an event store that implements ``append``, ``list_events``, ``get_event``,
    ``delete_event(event_id) -> bool``, ``purge_user(user_id) -> int`` (events, indexes
    and counter) and ``delete_events_before(cutoff, *, user_id=None) -> int``. A store
    may override any member here with a cheaper native query.
    """

    def init_schema(self) -> None:
        """The engine calls this before first use; our stores need no schema step here
        (indexes are provisioned explicitly by ``indexes ensure``)."""

    def get(self, event_id: Any) -> MemoryEvent | None:
        return self.get_event(str(event_id))  # type: ignore[attr-defined]

    def list_by_user(self, user_id: str) -> list[MemoryEvent]:
        return self.list_events(user_id)  # type: ignore[attr-defined]

    def count_for_user(self, user_id: str) -> int:
        return len(self.list_events(user_id))  # type: ignore[attr-defined]

    def query_by_user(self, user_id: str, *, query_embedding: Sequence[float] | None = None,
                      limit: int = 10) -> list[MemoryEvent]:
        """Newest first without a query; else cosine similarity descending (a zero-norm
        side scores 0), ties by sequence."""
        events = self.list_by_user(user_id)
        if query_embedding is None:
            events.sort(key=lambda e: (e.created_at, e.sequence), reverse=True)
            return events[: max(0, limit)]
        scored = [(_cosine(query_embedding, e.embedding), e) for e in events]
        scored.sort(key=lambda pair: (-pair[0], pair[1].sequence))
        return [e for _s, e in scored[: max(0, limit)]]

    def delete(self, event_id: Any) -> bool:
        return bool(self.delete_event(str(event_id)))  # type: ignore[attr-defined]

    def delete_by_user(self, user_id: str) -> int:
        """Every event of the user, and the counter (a next event starts again at 1)."""
        return self.purge_user(user_id)  # type: ignore[attr-defined]

    def delete_older_than(self, *args: Any, **kwargs: Any) -> int:
        """Both spellings: the engine's ``(user_id, cutoff)`` and ours
        ``(cutoff, *, user_id=None)``; deletes events created strictly before cutoff."""
        if args and isinstance(args[0], str):
            if len(args) != 2 or kwargs:
                raise TypeError("delete_older_than(user_id, cutoff) takes exactly two arguments")
            user_id, cutoff = args
            return self.delete_events_before(cutoff, user_id=user_id)  # type: ignore[attr-defined]
        return self.delete_events_before(*args, **kwargs)  # type: ignore[attr-defined]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b) or not len(a):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return 0.0 if na == 0.0 or nb == 0.0 else dot / (na * nb)


@speaks_both_conventions
class DerivedReads(StateStoreDefaults):
    """Mixin for state stores: ``load``, ``load_owner`` and ``current_version`` derived
    from one read, so a store writes ``load_full`` (and, when it can read a row without
    its blob, ``_head``) and the derived shapes are produced in one place. A store with
    cheaper native queries overrides the member it serves better."""

    def _read_full(self, session_id: str, owner_subject: OwnerFilter) -> LoadedState | None:
        """The one read of a whole row (default: the store's ``load_full``)."""
        return self.load_full(session_id, owner_subject=owner_subject)  # type: ignore[attr-defined]

    def _head(self, session_id: str, owner_subject: OwnerFilter) -> LoadedState | None:
        """The row without needing its blob (default: the whole row)."""
        return self._read_full(session_id, owner_subject)

    def load(self, session_id: str, *,
             owner_subject: OwnerFilter = UNSCOPED) -> tuple[bytes, int] | None:
        full = self._read_full(session_id, owner_subject)
        return None if full is None else (full.blob, full.version)

    def load_owner(self, session_id: str, *,
                   owner_subject: OwnerFilter = UNSCOPED) -> str | None:
        head = self._head(session_id, owner_subject)
        return None if head is None else head.owner_subject

    def current_version(self, session_id: str, *,
                        owner_subject: OwnerFilter = UNSCOPED) -> int | None:
        head = self._head(session_id, owner_subject)
        return None if head is None else head.version


class ClosesOnce:
    """Mixin for adapters: ``close()`` releases resources once (``_release``) and every
    later call does nothing; the adapter is also a context manager that closes."""

    _closed = False

    def _release(self) -> None:
        """Release connections and pools (the adapter's own part of closing)."""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._release()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@speaks_both_conventions
class StateStoreSeams(AdapterDefaults):
    """Mixin for adapters: expose the state store's session seams (enumerate, describe,
    restore) on the adapter, where the CLI detects them, without restating each one."""

    def iter_sessions(self, *, owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                      batch_size: int = 500) -> Iterator[SessionSummary]:
        return self.state_store().iter_sessions(  # type: ignore[attr-defined]
            owner_subject=owner_subject, match=match, batch_size=batch_size)

    def describe_session(self, session_id: str, *,
                         owner_subject: OwnerFilter = UNSCOPED) -> SessionSummary | None:
        return self.state_store().describe_session(  # type: ignore[attr-defined]
            session_id, owner_subject=owner_subject)

    def restore_session(self, session_id: str, blob: bytes, *, version: int,
                        owner_subject: str | None = None, pending_message: str | None = None,
                        ttl_seconds: int | None = None) -> None:
        self.state_store().restore_session(  # type: ignore[attr-defined]
            session_id, blob, version=version, owner_subject=owner_subject,
            pending_message=pending_message, ttl_seconds=ttl_seconds)


class ItemEraser:
    """The engine's ``Erasable`` (``erasure_backend()``) over an item mirror:
    ``erase_sessions(session_ids, *, user_id=None, scope=...) -> int`` rows removed.

    Items carry no user id, so ``user_id`` narrows nothing (the engine's ``None`` = every
    subject in those sessions is what happens either way). ``scope`` (the engine's
    object with ``owner_subject``) keeps the delete to that tenant's rows; ``scope=None``
    removes every owner's. Our callers may pass the three-state ``owner_subject=``
    instead (None = unowned rows only). An empty list removes nothing."""

    def __init__(self, delete: Callable[[list[str], OwnerFilter], int]) -> None:
        self._delete = delete

    def erase_sessions(self, session_ids: Sequence[str], *, user_id: str | None = None,
                       scope: Any = None, owner_subject: OwnerFilter = UNSCOPED) -> int:
        from backends.contract.owner import owner_of_scope, validate_owner_filter

        if scope is not None and owner_subject is not UNSCOPED:
            raise TypeError("pass scope= or owner_subject=, not both")
        if scope is not None:
            owner_subject = owner_of_scope(scope)
        validate_owner_filter(owner_subject)
        ids = [str(s) for s in session_ids if s]
        if not ids:
            return 0
        return int(self._delete(ids, owner_subject))
