"""Optional operator seams: what an adapter, its state store or its event store may
offer beyond the required contract. Never probed directly: :mod:`backends.contract.
capabilities` maps each to a :class:`~backends.contract.capabilities.Capability`, and
``offers()`` / ``capabilities_of()`` are the one detector (the CLI says "not supported by
backend X" otherwise)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ContextManager, Iterator, NamedTuple, Protocol, Sequence, runtime_checkable

from backends.contract.protocols import RetrievalBackend
from backends.contract.values import (IndexAction, IndexReport, IndexSpec, ItemSyncResult, LedgerEntry,
                                      LedgerKey, StoreIdentity, LogShape, LoadedState, MemoryEvent, MemoryItem,
                                      SessionSummary)
from backends.contract.owner import UNSCOPED, OwnerFilter


@runtime_checkable
class SessionEnumerator(Protocol):
    """Stream sessions without loading every blob at once."""

    def iter_sessions(
        self,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        match: str | None = None,
        batch_size: int = 500,
    ) -> Iterator[SessionSummary]: ...

    def describe_session(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> SessionSummary | None: ...


@runtime_checkable
class IndexManager(Protocol):
    """Explicit provisioning: ``ensure`` is the only path that mutates."""

    def index_plan(self, *, dimensions: int | None = None) -> list[IndexSpec]: ...

    def ensure_indexes(
        self,
        *,
        dimensions: int | None = None,
        recreate: bool = False,
        apply: bool = True,
    ) -> list[IndexAction]: ...

    def validate_indexes(self, *, dimensions: int | None = None) -> list[IndexReport]: ...


@runtime_checkable
class LiveItemSource(Protocol):
    """Enumerate a session's live (not evicted) memory items, for in-process retrieval."""

    def iter_live_items(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> Iterator[MemoryItem]: ...


@runtime_checkable
class ItemMirror(Protocol):
    """Write path of the item mirror: add / update / soft-evict by diff, idempotently."""

    def sync_items(
        self, session_id: str, items: Sequence[MemoryItem], *, owner_subject: str | None = None
    ) -> ItemSyncResult: ...


@runtime_checkable
class SessionRestorer(Protocol):
    """Lossless import: create a session at a given version; never overwrites."""

    def restore_session(
        self,
        session_id: str,
        blob: bytes,
        *,
        version: int,
        owner_subject: str | None = None,
        pending_message: str | None = None,
        ttl_seconds: int | None = None,
    ) -> None: ...


@runtime_checkable
class HealthDetails(Protocol):
    """Operator facts beyond up/down (durability, topology), bounded by ``timeout``."""

    def health_details(self, timeout: float) -> dict[str, Any]: ...


@runtime_checkable
class EventPurger(Protocol):
    """Optional on an event store: remove every trace of one user id (events, indexes,
    counters). Used by conformance runs so that nothing of theirs is left behind."""

    def purge_user(self, user_id: str) -> int: ...


@runtime_checkable
class ItemPurger(Protocol):
    """Optional on an adapter with an item mirror: hard-delete one session's mirrored
    items (the mirror otherwise only soft-evicts)."""

    def purge_items(self, session_id: str) -> int: ...


@runtime_checkable
class ServerRetrieval(Protocol):
    """Optional, ours (not the engine's): the adapter's server-side retriever, reached by
    semvecctl (``retrieve run|diff``, conformance), never handed to the engine.

    ``server_retriever()`` returns an object whose ``search(ctx)`` takes OUR
    :class:`RetrievalContext`, which names the session (``session_id``) and the owner
    filter of each query, or None when the store cannot rank server-side (for example a
    MongoDB store without the item mirror). It is session-scoped by its context: the
    engine's ``retrieval_backend()`` hands out one retriever for every session and a
    context without session or owner (ENGINE-WIRE section 6), so an adapter whose
    retriever needs them returns None there and offers this instead."""

    def server_retriever(self) -> RetrievalBackend | None: ...



class StoredDigest(NamedTuple):
    """A session row as a verification compares it: the blob as its sha256 (hex)."""

    blob_sha256: str
    version: int
    owner_subject: str | None
    pending_message: str | None
    drift_exempt: bool



class RestoreRow(NamedTuple):
    """One session for :class:`BatchSessionRestorer` (what ``restore_session`` takes)."""

    session_id: str
    blob: bytes
    version: int
    owner_subject: str | None = None
    pending_message: str | None = None
    ttl_seconds: int | None = None
    drift_exempt: bool = False
    updated_at: Any = None


@runtime_checkable
class BatchSessionRestorer(Protocol):
    """Optional on a state store: ``restore_session`` for many rows in one round trip
    and one transaction, never overwriting; returns the ids that already existed (those
    rows were not written). A live migration's bulk pass uses it where present."""

    def restore_sessions(self, rows: Sequence[RestoreRow]) -> set[str]: ...


@runtime_checkable
class SessionStateLister(Protocol):
    """Optional on an adapter: each session's summary with its row, both from one read
    (under the owner filter and glob), so a live migration's full pass reads each blob
    once: the digest it compares is the one of the bytes it copies. A damaged row raises
    as ``load_full`` would."""

    def iter_session_states(self, *, owner_subject: OwnerFilter = UNSCOPED,
                            match: str | None = None, batch_size: int = 500
                            ) -> Iterator[tuple[SessionSummary, LoadedState]]: ...


@runtime_checkable
class VersionLister(Protocol):
    """Optional on an adapter: ``(session id, version)`` of every session (under the
    owner filter and glob) without reading blobs; a live migration's catch-up passes
    use it to find what moved, the final pass still compares digests."""

    def iter_versions(self, *, owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                      batch_size: int = 500) -> Iterator[tuple[str, int]]: ...




@runtime_checkable
class EventRestorer(Protocol):
    """Optional on an event store: lossless import of a compliance log.

    ``restore_events`` writes events that already carry their sequence numbers (never
    overwriting an existing event id, which is a conflict); ``read_counter`` is the
    user's last handed-out sequence (0 when none); ``raise_counter`` sets it to at least
    ``value`` (never lowers it) and returns the result, so the next append continues
    after the highest restored number."""

    def restore_events(self, events: Sequence[MemoryEvent]) -> int: ...

    def read_counter(self, user_id: str) -> int: ...

    def raise_counter(self, user_id: str, value: int) -> int: ...


#: Points an adapter's fault seam may offer (conformance only, never in production):
#: ``turn.after_state`` fails the next commit_turn with :class:`InjectedFault` after its
#: state write and before its events; ``turn.cut_connection`` drops the connection at
#: the same point, so the driver sees a connection error.
FAULT_POINTS = frozenset({"turn.after_state", "turn.cut_connection"})


@runtime_checkable
class FaultSeam(Protocol):
    """Optional on an adapter: plant a failure inside the next write, for the
    conformance cases that check a turn lands whole or not at all. ``fault_points``
    names the points of :data:`FAULT_POINTS` this adapter can honour;
    ``inject_fault(point)`` is a context manager that arms it for the next turn."""

    fault_points: frozenset[str]

    def inject_fault(self, point: str) -> ContextManager[None]: ...


@runtime_checkable
class SearchIndexWaiter(Protocol):
    """Optional on an adapter whose search indexes build in the background: block until
    they are queryable or ``timeout`` passes, reporting each index's state."""

    def wait_for_search_indexes(self, *args: Any, **kwargs: Any) -> Any: ...


@runtime_checkable
class Closeable(Protocol):
    """Optional on an adapter: release connections. Calling it twice must not raise."""

    def close(self) -> None: ...


@runtime_checkable
class SessionSubjects(Protocol):
    """Optional on an event store: the owners whose events carry a session id, so an
    export can find a session's events."""

    def session_subjects(self, *args: Any, **kwargs: Any) -> Any: ...


@runtime_checkable
class SubjectsBySession(Protocol):
    """Optional on an event store without a per-session index (Redis): every session's
    users in one pass, so an export with events pays one scan instead of one per session."""

    def subjects_by_session(self) -> dict[str, list[str]]: ...





@runtime_checkable
class DriftExemption(Protocol):
    """Optional on a state store (or its adapter): mark a session exempt from drift."""

    def set_drift_exempt(self, session_id: str, exempt: bool) -> None: ...





@runtime_checkable
class ErasureOffer(Protocol):
    """Optional on an adapter (the engine's seam): ``erasure_backend()`` returns what
    erases a subject's materialized item rows (``erase_sessions(session_ids, *, user_id,
    owner_subject) -> int``), or None."""

    def erasure_backend(self) -> Any: ...





@runtime_checkable
class ErasureLedgerOffer(Protocol):
    """Optional on an adapter (ours, the engine never reads it): ``erasure_ledger()``
    returns the store's :class:`ErasureLedger`, kept in a key family, table or collection
    of our own, so that a restore path can withhold what an erasure removed."""

    def erasure_ledger(self) -> "ErasureLedger": ...


class ErasureLedger(Protocol):
    """Where a store keeps its erasure ledger: secrets and entries, nothing else (the
    hashing is the caller's, :mod:`backends.transfer.withhold`)."""

    def keys(self) -> list[LedgerKey]: ...

    def add_key(self, key: LedgerKey) -> LedgerKey:
        """Keep ``key``; an own key only when the store has none yet (else the one it
        has is returned: two first erasures agree on one secret)."""
        ...

    def entries(self) -> list[LedgerEntry]: ...

    def add_entries(self, entries: Sequence[LedgerEntry]) -> None:
        """Keep each entry; one already there keeps the later erasure time (and its
        receipt) and the union of the session hashes. A new entry takes the store's next
        position (``seq``); one already there keeps its own (the caller's ``seq`` is
        ignored)."""
        ...

    def identity(self, *, create: bool = True) -> StoreIdentity | None:
        """The store's identity, made on first use when ``create`` (two first callers
        agree on one); None when there is none and ``create`` is false."""
        ...

    def now(self) -> datetime:
        """The store's own clock (aware UTC): Redis ``TIME``, PostgreSQL ``now()`` on the
        primary, MongoDB ``$$NOW``; the process clock where the store has none."""
        ...

    def emptied_logs(self) -> list[tuple[str, int]] | None:
        """``(user_id, counter)`` of every user whose counter says events were written but
        who has none left (an erasure by id keeps the counter); None where the store
        keeps no counter apart from its events, so an emptied log cannot be told from one
        that never was."""
        ...


@runtime_checkable
class EventDeleter(Protocol):
    """Optional on an event store: delete one event by its id (True when it was there)."""

    def delete_event(self, event_id: str) -> bool: ...



@runtime_checkable
class DriftStatus(Protocol):
    """Optional on a state store (or its adapter): whether a session is exempt from drift
    (what an export carries and an import checks)."""

    def is_drift_exempt(self, session_id: str) -> bool: ...



@runtime_checkable
class EventLogShapes(Protocol):
    """Optional on an event store: every user's log shape (count, events per day) in one
    streaming pass, memory bounded by a batch of users (what ``semvecctl stats`` reads)."""

    def iter_log_shapes(self, *, batch_size: int = 500) -> Iterator[LogShape]: ...
