"""Optional operator seams: what an adapter, its state store or its event store may
offer beyond the required contract. Never probed directly: :mod:`backends.contract.
capabilities` maps each to a :class:`~backends.contract.capabilities.Capability`, and
``offers()`` / ``capabilities_of()`` are the one detector (the CLI says "not supported by
backend X" otherwise)."""

from __future__ import annotations

from typing import Any, ContextManager, Iterable, Iterator, NamedTuple, Protocol, Sequence, runtime_checkable

from backends.contract.protocols import RetrievalBackend
from backends.contract.values import (IndexAction, IndexReport, IndexSpec, ItemSyncResult, LogShape,
                                      LoadedState, MemoryEvent, MemoryItem, SessionSummary)
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


@runtime_checkable
class BatchStateReader(Protocol):
    """Optional on a state store: ``load_full`` for many sessions in one round trip, in
    order, ``None`` where a session is missing or filtered out (used by exports)."""

    def load_full_many(self, session_ids: Sequence[str], *,
                       owner_subject: OwnerFilter = UNSCOPED) -> list[LoadedState | None]: ...


class StoredDigest(NamedTuple):
    """A session row as a verification compares it: the blob as its sha256 (hex)."""

    blob_sha256: str
    version: int
    owner_subject: str | None
    pending_message: str | None
    drift_exempt: bool


@runtime_checkable
class BatchDigestReader(Protocol):
    """Optional on a state store that keeps drift flags: ``load_full_many`` with each
    blob's sha256 in place of the blob (hashed where the store can, so no blob travels)
    and the row's drift flag, in order, ``None`` where a session is missing or filtered
    out; a damaged row raises as ``load_full`` would. What ``migrate verify`` reads of
    the target, a batch per round trip instead of two flag reads per session."""

    def load_digests_many(self, session_ids: Sequence[str], *,
                          owner_subject: OwnerFilter = UNSCOPED) -> list[StoredDigest | None]: ...


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
class SessionIdLister(Protocol):
    """Optional on an adapter: the ids its ``iter_sessions`` lists (under the owner
    filter and glob), in no set order, without reading the rows (no digest computed):
    what a verification's search for sessions it never wrote reads."""

    def iter_session_ids(self, *, owner_subject: OwnerFilter = UNSCOPED,
                         match: str | None = None) -> Iterator[str]: ...


@runtime_checkable
class ChangeFeedSource(Protocol):
    """Optional on an adapter: a feed of what changed (Redis keyspace notifications), or
    None when the store has it off. The feed's ``drain()`` gives ``(session ids, user
    ids)`` touched since the last drain, or None when it may have lost messages; a
    live migration's catch-up passes read only those instead of scanning everything."""

    def change_feed(self) -> Any: ...


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
class SessionCounter(Protocol):
    """Optional on a state store: how many sessions a listing with the same owner filter
    and glob would show, counted by the store (one query, or a scan of keys that reads no
    value) instead of enumerated; None when the store cannot count these filters more
    cheaply than the listing (the caller then counts the listing)."""

    def count_sessions(self, *, owner_subject: OwnerFilter = UNSCOPED,
                       match: str | None = None) -> int | None: ...


@runtime_checkable
class WriteTimeDeclaration(Protocol):
    """A state store that declares ``records_write_time = True``: its session summaries
    carry ``updated_at``, the time of the last write (what ``sessions prune`` reads)."""

    records_write_time: bool


@runtime_checkable
class ExpiryListing(Protocol):
    """A state store that declares ``lists_expiry = False``: its session summaries never
    carry ``ttl_seconds`` (it keeps no per-session expiry), so copying from it can lose
    none; absent, a store may list one."""

    lists_expiry: bool


@runtime_checkable
class DriftExemption(Protocol):
    """Optional on a state store (or its adapter): mark a session exempt from drift."""

    def set_drift_exempt(self, session_id: str, exempt: bool) -> None: ...


@runtime_checkable
class RetryDeclaration(Protocol):
    """A state store that declares ``idempotent_retries = True``: a save retried with the
    same bytes after a lost reply is answered as the first was."""

    idempotent_retries: bool


@runtime_checkable
class SequenceDeclaration(Protocol):
    """An event store that declares ``assigns_sequences = False`` keeps no per-user
    sequence (the engine's SQL layout); absent, a store assigns them."""

    assigns_sequences: bool


@runtime_checkable
class ExpiryDeclaration(SessionRestorer, Protocol):
    """A restoring adapter that declares ``keeps_session_ttl = True``: it restores a
    session's expiry too."""

    keeps_session_ttl: bool


@runtime_checkable
class ErasureOffer(Protocol):
    """Optional on an adapter (the engine's seam): ``erasure_backend()`` returns what
    erases a subject's materialized item rows (``erase_sessions(session_ids, *, user_id,
    owner_subject) -> int``), or None."""

    def erasure_backend(self) -> Any: ...


@runtime_checkable
class EventRefReader(Protocol):
    """Optional on an event store: every event of a user id under any owner, read raw as
    ``(event_id, owner_subject, session_id, problem)``, so a damaged event is found too."""

    def event_refs(self, user_id: str) -> Iterable[tuple[Any, ...]]: ...


@runtime_checkable
class IndexEntryReader(Protocol):
    """Optional on an event store that keeps its indexes apart (Redis): how many index
    entries of each kind a user id has."""

    def index_entries(self, user_id: str) -> Any: ...


@runtime_checkable
class IndexEntryDropper(Protocol):
    """Optional on an event store that keeps its indexes apart: drop a user id's index
    entries that point at no event."""

    def drop_index_entries(self, user_id: str, event_ids: Sequence[str]) -> Any: ...


@runtime_checkable
class EventDeleter(Protocol):
    """Optional on an event store: delete one event by its id (True when it was there)."""

    def delete_event(self, event_id: str) -> bool: ...


@runtime_checkable
class PagedEventReader(Protocol):
    """Optional on an event store that keeps no sequence numbers: a user's events newest
    first, read a page at a time."""

    def iter_events(self, user_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
                    page: int = 500) -> Iterator[MemoryEvent]: ...


@runtime_checkable
class DriftStatus(Protocol):
    """Optional on a state store (or its adapter): whether a session is exempt from drift
    (what an export carries and an import checks)."""

    def is_drift_exempt(self, session_id: str) -> bool: ...


@runtime_checkable
class WriteCheck(Protocol):
    """Optional on a state store with stricter write rules than the contract's: run the
    checks a save or restore of these values runs, without any I/O (raises what the write
    would)."""

    def check_write(self, session_id: str, blob: bytes, *, version: int | None,
                    owner_subject: str | None = None,
                    pending_message: str | None = None) -> None: ...


@runtime_checkable
class EventLogShapes(Protocol):
    """Optional on an event store: every user's log shape (count, events per day) in one
    streaming pass, memory bounded by a batch of users (what ``semvecctl stats`` reads)."""

    def iter_log_shapes(self, *, batch_size: int = 500) -> Iterator[LogShape]: ...


@runtime_checkable
class ItemMirrorSize(Protocol):
    """Optional on an adapter with an item mirror: how big it is (rows, evicted rows and,
    where the store can say cheaply, bytes; ``None`` when it cannot), for ``stats``."""

    def item_mirror_size(self) -> dict[str, int | None]: ...
