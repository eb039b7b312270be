"""The session-backend contract: protocols, value types and the optional operator seams.

This module is the single source of truth for what an adapter must offer. It imports
nothing heavy (no drivers, no numpy) so that the registry and ``semvecctl --help`` stay
fast. Behavioural rules that ``isinstance`` cannot see are pinned by
``backends.conformance``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

from backends.errors import InvalidEvent, StateVersionConflict, is_state_version_conflict

__all__ = [
    "UNSCOPED",
    "ANONYMOUS_OWNER",
    "OwnerFilter",
    "StateVersionConflict",
    "is_state_version_conflict",
    "LoadedState",
    "MemoryEvent",
    "MemoryItem",
    "MemoryUnit",
    "RetrievalContext",
    "SessionSummary",
    "IndexSpec",
    "IndexAction",
    "IndexReport",
    "FieldDiff",
    "ItemSyncResult",
    "StateStoreProtocol",
    "EventStore",
    "RetrievalBackend",
    "BackendAdapter",
    "SessionEnumerator",
    "IndexManager",
    "LiveItemSource",
    "ItemMirror",
    "SessionRestorer",
    "HealthDetails",
    "EventPurger",
    "BatchStateReader",
    "ItemPurger",
    "REQUIRED_ADAPTER_MEMBERS",
    "owner_matches",
    "validate_event",
    "validate_owner_filter",
    "validate_save_args",
    "StateStoreSeams",
    "validate_turn_events",
    "normalise_pending",
    "Reranker",
]


class _Unscoped:
    """Sentinel type for an omitted owner filter (administrative, unscoped access)."""

    _instance: "_Unscoped | None" = None

    def __new__(cls) -> "_Unscoped":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSCOPED"

    def __reduce__(self) -> str:
        return "UNSCOPED"


#: Owner filter omitted: read or delete regardless of owner.
UNSCOPED: Any = _Unscoped()

#: What the engine writes for a session with no authenticated owner.
ANONYMOUS_OWNER = "__anonymous__"

#: ``UNSCOPED`` | ``None`` (only unowned rows) | an exact owner string.
OwnerFilter = Any


def validate_owner_filter(owner_subject: OwnerFilter) -> None:
    """Reject filters that are none of the three states (e.g. an int, an empty string)."""
    if owner_subject is UNSCOPED or owner_subject is None:
        return
    if not isinstance(owner_subject, str) or owner_subject == "":
        raise ValueError(
            "owner filter must be omitted, None (unowned rows only) or a non-empty string"
        )


def owner_matches(stored_owner: str | None, owner_subject: OwnerFilter) -> bool:
    """Apply the three-state owner filter to a stored owner (``None`` = no owner)."""
    if owner_subject is UNSCOPED:
        return True
    if owner_subject is None:
        return stored_owner is None
    return stored_owner == owner_subject


def normalise_pending(pending_message: str | None) -> str | None:
    """An empty pending message is stored as none."""
    return pending_message if pending_message else None


def validate_save_args(session_id: Any, blob: Any, expected_version: Any,
                       owner_subject: Any) -> None:
    """Refuse malformed save/restore arguments before any I/O, the same way in every store.

    ``expected_version`` is the CAS version (or the version to restore at): ``None`` or a
    positive int, never a bool.
    """
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("session_id must be a non-empty string")
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError("blob must be bytes")
    if expected_version is not None and (
        isinstance(expected_version, bool) or not isinstance(expected_version, int)
        or expected_version < 1
    ):
        raise ValueError("expected_version must be None or a positive int")
    if owner_subject is not None and (not isinstance(owner_subject, str) or not owner_subject):
        raise ValueError("owner_subject must be None or a non-empty string")


# --------------------------------------------------------------------------------------
# Value types
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedState:
    """Everything about a session row, read in one round trip."""

    blob: bytes
    version: int
    owner_subject: str | None
    pending_message: str | None


@dataclass(frozen=True)
class MemoryEvent:
    """One compliance event. ``sequence`` is assigned by the store (per user, 1-based,
    gap-free); callers leave it ``None``."""

    event_id: str
    user_id: str
    content: str
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    embedding: tuple[float, ...] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    source_event_id: str | None = None
    sequence: int | None = None
    owner_subject: str | None = None
    session_id: str | None = None

    def with_sequence(self, sequence: int) -> "MemoryEvent":
        return replace(self, sequence=sequence)

    def to_record(self) -> dict[str, Any]:
        """JSON-safe dict (ISO timestamp, list embedding) used by every store."""
        return {
            "event_id": self.event_id,
            "user_id": self.user_id,
            "owner_subject": self.owner_subject,
            "session_id": self.session_id,
            "created_at": self.created_at.astimezone(timezone.utc).isoformat(),
            "content": self.content,
            "embedding": list(self.embedding) if self.embedding is not None else None,
            "meta": dict(self.meta),
            "source_event_id": self.source_event_id,
            "sequence": self.sequence,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "MemoryEvent":
        created = record["created_at"]
        if isinstance(created, str):
            created = datetime.fromisoformat(created)
        if created.tzinfo is None:
            created = created.replace(tzinfo=timezone.utc)
        embedding = record.get("embedding")
        seq = record.get("sequence")
        return cls(
            event_id=str(record["event_id"]),
            user_id=str(record["user_id"]),
            content=record.get("content") or "",
            created_at=created.astimezone(timezone.utc),
            embedding=tuple(float(x) for x in embedding) if embedding is not None else None,
            meta=dict(record.get("meta") or {}),
            source_event_id=record.get("source_event_id") or None,
            sequence=int(seq) if seq not in (None, "") else None,
            owner_subject=record.get("owner_subject") or None,
            session_id=record.get("session_id") or None,
        )


def validate_event(event: Any) -> MemoryEvent:
    """Validate one event before anything of its turn is written.

    Raises :class:`InvalidEvent` naming the field. Stores call this for every event of a
    turn *before* their first write, so a malformed event leaves state and events untouched.
    """
    if not isinstance(event, MemoryEvent):
        raise InvalidEvent(f"expected a MemoryEvent, got {type(event).__name__}")
    for name in ("event_id", "user_id"):
        value = getattr(event, name)
        if not isinstance(value, str) or not value:
            raise InvalidEvent(f"event {name} must be a non-empty string")
    if not isinstance(event.content, str):
        raise InvalidEvent("event content must be a string")
    if not isinstance(event.created_at, datetime) or event.created_at.tzinfo is None:
        raise InvalidEvent("event created_at must be a timezone-aware datetime")
    if event.sequence is not None:
        raise InvalidEvent("event sequence is assigned by the store; leave it None")
    if event.embedding is not None:
        try:
            values = [float(x) for x in event.embedding]
        except (TypeError, ValueError):
            raise InvalidEvent("event embedding must be a sequence of numbers") from None
        if any(math.isnan(x) or math.isinf(x) for x in values):
            raise InvalidEvent("event embedding must not contain NaN or infinity")
    if not isinstance(event.meta, Mapping):
        raise InvalidEvent("event meta must be a mapping")
    try:
        json.dumps(dict(event.meta), allow_nan=False)
    except (TypeError, ValueError):
        raise InvalidEvent("event meta must be JSON-serialisable") from None
    for name in ("owner_subject", "session_id", "source_event_id"):
        value = getattr(event, name)
        if value is not None and not isinstance(value, str):
            raise InvalidEvent(f"event {name} must be a string or None")
    return event


def validate_turn_events(events: Iterable[Any] | None) -> list[MemoryEvent]:
    """Validate every event of a turn; duplicate event ids within a turn are refused."""
    checked = [validate_event(e) for e in (events or ())]
    seen: set[str] = set()
    for event in checked:
        if event.event_id in seen:
            raise InvalidEvent(f"event id {event.event_id!r} appears twice in one turn")
        seen.add(event.event_id)
    return checked


@dataclass(frozen=True)
class MemoryItem:
    """A live memory item of a session, as mirrored for retrieval."""

    item_id: str
    text: str
    embedding: tuple[float, ...] | None = None
    tier: str | None = None
    tiers: tuple[str, ...] = ()
    unit: Mapping[str, Any] = field(default_factory=dict)
    evicted: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None
    owner_subject: str | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class MemoryUnit:
    """One retrieval result, the same shape whichever side ranked it."""

    item_id: str
    text: str
    score: float
    tier: str | None = None
    embedding: tuple[float, ...] | None = None
    updated_at: datetime | None = None
    owner_subject: str | None = None
    session_id: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


Reranker = Callable[[str, Sequence[MemoryUnit]], Sequence[float]]


@dataclass
class RetrievalContext:
    """Everything a retriever needs for one query.

    ``owner_subject`` is the three-state filter; ``memory`` carries the live items for
    in-process retrieval; ``stage`` is an optional trace callback ``stage(name, payload)``.
    """

    session_id: str
    query_embedding: Sequence[float] | None = None
    query_text: str | None = None
    top_k: int = 5
    owner_subject: OwnerFilter = UNSCOPED
    use_bm25: bool = False
    bm25_fetch_k: int = 20
    mmr_fetch_k: int = 0
    mmr_lambda: float = 0.5
    rrf_k: int = 60
    rrf_weights: tuple[float, float] = (1.0, 1.0)
    fuse_with_bm25: bool = True
    reranker: Reranker | None = None
    memory: Sequence[MemoryItem] | None = None
    stage: Callable[[str, Any], None] | None = None


@dataclass(frozen=True)
class SessionSummary:
    """What enumeration reports about a session, without its blob."""

    session_id: str
    version: int
    owner_subject: str | None
    pending_message: str | None
    blob_size: int
    blob_sha256: str
    ttl_seconds: int | None = None
    updated_at: datetime | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexSpec:
    """One index a backend needs. ``definition`` is backend-native (keys, options)."""

    name: str
    target: str
    kind: str
    definition: Mapping[str, Any]
    required: bool = True


@dataclass(frozen=True)
class FieldDiff:
    field: str
    expected: Any
    actual: Any


@dataclass(frozen=True)
class IndexReport:
    """Validation verdict for one index: ``ok``, ``missing``, ``drift``, ``pending``
    (building, not yet queryable), ``unsupported`` or ``extra`` (informational)."""

    name: str
    target: str
    kind: str
    status: str
    differences: tuple[FieldDiff, ...] = ()
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "extra")


@dataclass(frozen=True)
class IndexAction:
    """What ``ensure`` did or would do: ``create``, ``exists``, ``mismatch`` (left alone),
    ``recreate``, ``update`` (changed in place) or ``unsupported``."""

    name: str
    target: str
    kind: str
    action: str
    detail: str = ""
    applied: bool = False


@dataclass(frozen=True)
class ItemSyncResult:
    added: int = 0
    updated: int = 0
    evicted: int = 0
    unchanged: int = 0


# --------------------------------------------------------------------------------------
# The contract
# --------------------------------------------------------------------------------------


@runtime_checkable
class StateStoreProtocol(Protocol):
    """Compare-and-set session state. ``expected_version=None`` inserts at version 1 and
    never overwrites; an int updates only on an exact match, to exactly +1. The row is
    written whole (an omitted owner clears it). Reads and deletes take the three-state
    owner filter."""

    def save(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: str | None = None,
        pending_message: str | None = None,
    ) -> int: ...

    def load(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> bytes | None: ...

    def load_full(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> LoadedState | None: ...

    def load_owner(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> str | None: ...

    def current_version(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> int | None: ...

    def delete(self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED) -> bool: ...


@runtime_checkable
class EventStore(Protocol):
    """Per-user, gap-free, sequence-ordered compliance log."""

    def append(self, event: MemoryEvent) -> MemoryEvent: ...

    def list_events(
        self,
        user_id: str,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        after_sequence: int = 0,
        limit: int | None = None,
    ) -> list[MemoryEvent]: ...

    def get_event(self, event_id: str) -> MemoryEvent | None: ...

    def delete_older_than(self, cutoff: datetime, *, user_id: str | None = None) -> int: ...


@runtime_checkable
class RetrievalBackend(Protocol):
    """A retriever. ``inert_fields`` declares the RetrievalContext fields it ignores."""

    name: str
    inert_fields: frozenset[str]

    def search(self, ctx: RetrievalContext) -> list[MemoryUnit]: ...


@runtime_checkable
class BackendAdapter(Protocol):
    """What the registry attaches. ``is_persistent`` is a class-level bool."""

    name: str
    is_persistent: bool

    def state_store(self) -> StateStoreProtocol: ...

    def event_store(self) -> EventStore | None: ...

    def retrieval_backend(self) -> RetrievalBackend | None: ...

    def commit_turn(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: str | None = None,
        pending_message: str | None = None,
        events: Sequence[MemoryEvent] | None = None,
    ) -> int: ...

    def check_health(self) -> bool: ...


#: Members the registry checks on every adapter (defined beside the registry, which must
#: stay cheap to import).
from backends.registry import REQUIRED_ADAPTER_MEMBERS  # noqa: E402


# --------------------------------------------------------------------------------------
# Optional operator seams. The CLI detects them with isinstance() on the adapter and
# says "not supported by backend X" otherwise.
# --------------------------------------------------------------------------------------


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


class StateStoreSeams:
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
class BatchStateReader(Protocol):
    """Optional on a state store: ``load_full`` for many sessions in one round trip, in
    order, ``None`` where a session is missing or filtered out (used by exports)."""

    def load_full_many(self, session_ids: Sequence[str], *,
                       owner_subject: OwnerFilter = UNSCOPED) -> list[LoadedState | None]: ...
