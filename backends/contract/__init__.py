"""The session-backend contract: protocols, value types and the optional operator seams.

This module is the single source of truth for what an adapter must offer. It imports
nothing heavy (no drivers, no numpy) so that the registry and ``semvecctl --help`` stay
fast. Behavioural rules that ``isinstance`` cannot see are pinned by
``backends.conformance``.
"""

from __future__ import annotations

import json
import math
import operator
import re
import sys
from collections.abc import Iterable, Mapping  # not typing's: isinstance is on the hot path
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from enum import Enum
from typing import (Any, Callable, ContextManager, Iterator, NamedTuple, Protocol, Sequence,
                    runtime_checkable)

from backends.errors import InvalidEvent, StateVersionConflict, is_state_version_conflict

__all__ = [
    "UNSCOPED",
    "ANONYMOUS_OWNER",
    "OwnerFilter",
    "OwnerScope",
    "owner_of_scope",
    "speaks_both_conventions",
    "takes_scope",
    "coerce_event",
    "EngineEventSurface",
    "EventRestorer",
    "FaultSeam",
    "FAULT_POINTS",
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
    "ServerRetrieval",
    "server_retriever_of",
    "REQUIRED_ADAPTER_MEMBERS",
    "Capability",
    "CapabilitySpec",
    "CAPABILITIES",
    "capabilities_of",
    "offers",
    "fault_points_of",
    "close_quietly",
    "SearchIndexWaiter",
    "Closeable",
    "SessionSubjects",
    "SubjectsBySession",
    "WriteTimeDeclaration",
    "DriftExemption",
    "owner_matches",
    "validate_event",
    "validate_owner_filter",
    "validate_save_args",
    "StateStoreSeams",
    "ClosesOnce",
    "DerivedReads",
    "validate_turn_events",
    "normalise_pending",
    "as_utc",
    "check_delete_version",
    "Reranker",
]


#: Re-exported here so the contract stays the one import for adapter authors.
from backends.owner import (  # noqa: E402
    ANONYMOUS_OWNER,
    UNSCOPED,
    OwnerFilter,
    OwnerScope,
    owner_matches,
    owner_of_scope,
    speaks_both_conventions,
    takes_scope,
    validate_owner_filter,
)


def as_utc(value: datetime) -> datetime:
    """An aware UTC datetime. A naive one is read as UTC: the engine stores UTC wall time
    (SQL TIMESTAMP, BSON dates, older event records), so that is what naive means here."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def normalise_pending(pending_message: str | None) -> str | None:
    """An empty pending message is stored as none."""
    return pending_message if pending_message else None


def check_delete_version(session_id: str, stored_version: int,
                         expected_version: int | None) -> None:
    """The rule of a version-checked delete, said once: a row that has moved past what
    the caller saw is a conflict, and nothing is deleted."""
    if expected_version is None:
        return
    if isinstance(expected_version, bool) or not isinstance(expected_version, int) \
            or expected_version < 1:
        raise ValueError("expected_version must be None or a positive int")
    if stored_version != expected_version:
        raise StateVersionConflict(
            f"session {session_id!r} is at version {stored_version}, not "
            f"{expected_version}; nothing was deleted"
        )


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


class LoadedState(NamedTuple):
    """Everything about a session row, read in one round trip (a NamedTuple, as the
    engine's, so callers may unpack it)."""

    blob: bytes
    version: int
    owner_subject: str | None
    pending_message: str | None


#: An event's attributes, as the engine names them.
EVENT_FIELDS = ("event_id", "user_id", "created_at", "content", "embedding", "meta",
                "source_event_id", "sequence", "owner_subject", "session_id")


@dataclass(frozen=True)
class MemoryEvent:
    """One compliance event, in the engine's shape.

    ``event_id`` and ``source_event_id`` are UUID strings (checked by
    :func:`validate_event` before any write, not here, so that a store can still read a
    damaged legacy row and report it); ``embedding`` is a possibly empty sequence, never
    None; ``owner_subject`` and ``session_id`` are ``""`` when absent (the engine's
    encoding); ``sequence`` is assigned by the store (per user, 1-based, gap-free) and is
    0 until then. Construction folds the lossless variants (UUID objects, None for "",
    a list embedding) into that shape.
    """

    event_id: str
    user_id: str
    content: str
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    embedding: Sequence[float] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    source_event_id: str | None = None
    sequence: int = 0
    owner_subject: str = ""
    session_id: str = ""

    def __post_init__(self) -> None:
        fix = object.__setattr__
        if not isinstance(self.event_id, str) and self.event_id is not None:
            fix(self, "event_id", str(self.event_id))
        if self.source_event_id is not None and not isinstance(self.source_event_id, str):
            fix(self, "source_event_id", str(self.source_event_id))
        if self.source_event_id == "":
            fix(self, "source_event_id", None)
        if self.embedding is None:
            fix(self, "embedding", ())
        elif isinstance(self.embedding, list):
            fix(self, "embedding", tuple(self.embedding))
        if self.owner_subject is None:
            fix(self, "owner_subject", "")
        if self.session_id is None:
            fix(self, "session_id", "")
        if self.sequence is None:
            fix(self, "sequence", 0)

    def with_sequence(self, sequence: int) -> "MemoryEvent":
        return replace(self, sequence=sequence)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict with exactly the engine's keys (ISO timestamp, ids as strings,
        list embedding). Like the engine's, it leaves out ``sequence``, which belongs to
        the store; a caller that keeps it (an archive) adds it, and :meth:`from_dict`
        reads it back."""
        return {
            "event_id": self.event_id,
            "user_id": self.user_id,
            "created_at": self.created_at.astimezone(timezone.utc).isoformat(),
            "content": self.content,
            "embedding": [float(x) for x in self.embedding],
            "meta": dict(self.meta),
            "owner_subject": self.owner_subject,
            "session_id": self.session_id,
            "source_event_id": self.source_event_id,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "MemoryEvent":
        """The inverse of :meth:`to_dict`; also reads the older encodings (None for
        unowned, a null embedding, an empty or missing sequence). Naive times are UTC."""
        created = record["created_at"]
        created = as_utc(datetime.fromisoformat(created) if isinstance(created, str) else created)
        embedding = record.get("embedding")
        seq = record.get("sequence")
        return cls(
            event_id=str(record["event_id"]),
            user_id=str(record["user_id"]),
            content=record.get("content") or "",
            created_at=created,
            embedding=tuple(float(x) for x in embedding) if embedding else (),
            meta=dict(record.get("meta") or {}),
            source_event_id=str(record["source_event_id"]) if record.get("source_event_id") else None,
            sequence=int(seq) if seq not in (None, "") else 0,
            owner_subject=record.get("owner_subject") or "",
            session_id=record.get("session_id") or "",
        )


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _uuid_text(value: Any, name: str) -> str:
    """The canonical text of a UUID given as a UUID object or a string; InvalidEvent else."""
    import uuid

    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        if _CANONICAL_UUID.fullmatch(value):
            return value
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    raise InvalidEvent(f"event {name} must be a UUID (the engine cannot read {value!r})")


def coerce_event(event: Any) -> MemoryEvent:
    """A :class:`MemoryEvent` from ours or from any object with the engine's event
    attributes (duck-typed: the engine's own class is never imported)."""
    if isinstance(event, MemoryEvent):
        return event
    try:
        values = {name: getattr(event, name) for name in EVENT_FIELDS
                  if name not in ("sequence", "owner_subject", "session_id", "source_event_id",
                                  "embedding", "meta", "created_at")}
    except AttributeError:
        raise InvalidEvent(
            f"expected a MemoryEvent or an object with the engine's event attributes, "
            f"got {type(event).__name__}"
        ) from None
    for name in ("created_at", "embedding", "meta", "source_event_id", "sequence",
                 "owner_subject", "session_id"):
        if hasattr(event, name):
            values[name] = getattr(event, name)
    return MemoryEvent(**values)


_STRICT_JSON = json.JSONEncoder(allow_nan=False)


def meta_json(meta: Mapping[str, Any]) -> str:
    """An event's meta as the engine stores it: ``json.dumps`` with its defaults, NaN and
    infinity refused (ValueError; TypeError for what JSON cannot hold). One encoder is
    kept: ``json.dumps`` builds a new one per call for any non-default option."""
    return _STRICT_JSON.encode(dict(meta))


def validate_event(event: Any) -> MemoryEvent:
    """Validate one event before anything of its turn is written; return it in canonical
    form (UUID text, float embedding).

    Raises :class:`InvalidEvent` naming the field. Stores call this for every event of a
    turn *before* their first write, so a malformed event leaves state and events untouched.
    """
    event = coerce_event(event)
    event_id = _uuid_text(event.event_id, "event_id")
    source = (None if event.source_event_id is None
              else _uuid_text(event.source_event_id, "source_event_id"))
    if not isinstance(event.user_id, str) or not event.user_id:
        raise InvalidEvent("event user_id must be a non-empty string")
    if not isinstance(event.content, str):
        raise InvalidEvent("event content must be a string")
    if not isinstance(event.created_at, datetime) or event.created_at.tzinfo is None:
        raise InvalidEvent("event created_at must be a timezone-aware datetime")
    if event.sequence not in (0, None):
        raise InvalidEvent("event sequence is assigned by the store; leave it 0")
    embedding = _checked_embedding(event.embedding)
    if not isinstance(event.meta, Mapping):
        raise InvalidEvent("event meta must be a mapping")
    try:
        meta_json(event.meta)
    except (TypeError, ValueError):
        raise InvalidEvent("event meta must be JSON-serialisable") from None
    for name in ("owner_subject", "session_id"):
        if not isinstance(getattr(event, name), str):
            raise InvalidEvent(f"event {name} must be a string ('' when absent)")
    if ((event_id, source) == (event.event_id, event.source_event_id)
            and embedding is event.embedding):
        return event
    return replace(event, event_id=event_id, source_event_id=source, embedding=embedding)


def _checked_embedding(embedding: Any) -> tuple[float, ...]:
    """Finite floats, as a tuple, with no per-float Python work: a numpy array is checked
    in one vectorised pass; a tuple or list of exact floats is recognised by a C-level
    count of their types and kept; any other sequence goes through ``float()`` once, at C
    speed. One C-level sum then screens it (a sum is finite only if every value is; the rare
    overflowing sum is settled value by value)."""
    if isinstance(embedding, (str, bytes)) or not isinstance(embedding, Iterable):
        raise InvalidEvent("event embedding must be a sequence of numbers")
    array = _numeric_array(embedding)
    if array is not None:
        import numpy as np

        if not bool(np.isfinite(array).all()):
            _refuse_non_finite(array.tolist())
        return tuple(array.tolist())
    if (isinstance(embedding, (tuple, list))
            and operator.countOf(map(type, embedding), float) == len(embedding)):
        values = tuple(embedding)  # exact floats already (a tuple is kept, so is the event)
    else:
        values = _floats(embedding)
    if not math.isfinite(sum(values)) and not all(map(math.isfinite, values)):
        _refuse_non_finite(values)
    return values


def _numeric_array(embedding: Any) -> Any:
    """A one-dimensional numpy array of numbers as float64; None for anything else (numpy
    is only looked at when the caller already loaded it)."""
    np = sys.modules.get("numpy")
    if np is None or not isinstance(embedding, np.ndarray) or embedding.dtype.kind not in "fiub":
        return None
    if embedding.ndim != 1:
        raise InvalidEvent("event embedding must be a sequence of numbers")
    return embedding.astype(np.float64, copy=False)


def _refuse_non_finite(values: Sequence[float]) -> None:
    bad = next(i for i, x in enumerate(values) if not math.isfinite(x))
    raise InvalidEvent(f"event embedding must not contain NaN or infinity "
                       f"(value {bad} is {values[bad]!r})")


def _floats(embedding: Any) -> tuple[float, ...]:
    """``float()`` of every value; InvalidEvent for anything that is not a number."""
    try:
        return tuple(map(float, embedding))
    except (TypeError, ValueError, OverflowError):
        raise InvalidEvent("event embedding must be a sequence of numbers") from None


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
    #: the item's 0-based position in each tier it sits in (``{"short_term": 3}``), as the
    #: engine keeps its tiers; empty when the source cannot tell (then the source's order).
    positions: Mapping[str, int] = field(default_factory=dict)


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
    Defaults are the engine's (``bm25_fetch_k`` 50); ``rrf_k`` / ``rrf_weights`` None mean
    "not given": ``SEMVEC_RRF_K`` / ``SEMVEC_RRF_WEIGHTS``, else 60 / 1.0 each
    (``backends.retrieval.fusion.effective_rrf_k`` / ``effective_rrf_weights``).
    """

    session_id: str
    query_embedding: Sequence[float] | None = None
    query_text: str | None = None
    top_k: int = 5
    owner_subject: OwnerFilter = UNSCOPED
    use_bm25: bool = False
    bm25_fetch_k: int = 50
    mmr_fetch_k: int = 0
    mmr_lambda: float = 0.5
    rrf_k: int | None = None
    rrf_weights: tuple[float, float] | None = None
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
    """Compare-and-set session state.

    The owner is passed as ``owner_subject=`` (the spec's spelling) or ``scope=`` (the
    engine's: an object with an ``owner_subject`` string, or None), never both; stores
    get ``scope=`` from :func:`speaks_both_conventions`.

    Writes: ``expected_version=None`` inserts at version 1 and never overwrites; an int
    updates only on an exact match, to exactly +1. The row is written whole (an omitted
    owner clears it). A write naming an owner may adopt a row with no owner (None or
    ``""``) and is refused, as a conflict, for a row owned by someone else.

    Reads and deletes: ``owner_subject`` omitted = unscoped, ``None`` = only unowned
    rows, a string = that exact owner. With ``scope=``, None means unscoped (the engine
    has no way to ask for unowned rows only). ``load`` returns ``(blob, version)``, as
    the engine unpacks it. ``delete(expected_version=N)`` deletes only a row still at
    version N and raises a conflict, deleting nothing, when it has moved.
    """

    def save(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: str | None = None,
        pending_message: str | None = None,
    ) -> int: ...

    def load(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> tuple[bytes, int] | None: ...

    def load_full(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> LoadedState | None: ...

    def load_owner(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> str | None: ...

    def current_version(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> int | None: ...

    def delete(
        self,
        session_id: str,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        expected_version: int | None = None,
    ) -> bool: ...


@runtime_checkable
class EventStore(Protocol):
    """Per-user, gap-free, sequence-ordered compliance log (our surface; the engine's
    surface is :class:`EngineEventSurface`, which every shipped event store also offers).

    Every read that can reveal an event takes the three-state owner filter, applied
    before any limit."""

    def append(self, event: MemoryEvent) -> MemoryEvent: ...

    def list_events(
        self,
        user_id: str,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        after_sequence: int = 0,
        limit: int | None = None,
    ) -> list[MemoryEvent]: ...

    def get_event(
        self, event_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> MemoryEvent | None: ...

    def delete_older_than(self, *args: Any, **kwargs: Any) -> int: ...


class EngineEventSurface:
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


@runtime_checkable
class RetrievalBackend(Protocol):
    """A retriever. ``inert_fields`` declares the RetrievalContext fields it ignores."""

    name: str
    inert_fields: frozenset[str]

    def search(self, ctx: RetrievalContext) -> list[MemoryUnit]: ...


@runtime_checkable
class BackendAdapter(Protocol):
    """What the registry attaches. ``is_persistent`` is a class-level bool.

    ``commit_turn`` takes the owner as ``owner_subject=`` or ``scope=`` (never both) and
    the events as ours or the engine's own event objects (see :func:`coerce_event`); state
    and events land together or not at all, and a backend without an event store refuses
    events instead of dropping them."""

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


#: Members the registry checks on every adapter, as ``(name, must be callable)``. The
#: registry imports this lazily, when it checks an adapter, so listing stays cheap.
REQUIRED_ADAPTER_MEMBERS: tuple[tuple[str, bool], ...] = (
    ("name", False),
    ("is_persistent", False),
    ("state_store", True),
    ("event_store", True),
    ("retrieval_backend", True),
    ("commit_turn", True),
    ("check_health", True),
)


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


@speaks_both_conventions
class DerivedReads:
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
class WriteTimeDeclaration(Protocol):
    """A state store that declares ``records_write_time = True``: its session summaries
    carry ``updated_at``, the time of the last write (what ``sessions prune`` reads)."""

    records_write_time: bool


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


class Capability(str, Enum):
    """What an adapter can do beyond the required contract, named once.

    Each member maps (in :data:`CAPABILITIES`) to the object that offers it (the adapter,
    its state store or its event store), the protocol that describes it and the members
    that reveal it. :func:`capabilities_of` is the one detector."""

    SESSIONS = "sessions"
    RESTORE = "restore"
    INDEXES = "indexes"
    LIVE_ITEMS = "live-items"
    ITEM_MIRROR = "item-mirror"
    HEALTH_DETAILS = "health-details"
    SEARCH_INDEX_WAIT = "search-index-wait"
    SERVER_RETRIEVAL = "server-retrieval"
    PURGE_ITEMS = "purge-items"
    CLOSE = "close"
    FAULTS = "faults"
    KEEPS_SESSION_TTL = "keeps-session-ttl"
    IDEMPOTENT_RETRIES = "idempotent-retries"
    BATCH_READS = "batch-reads"
    DRIFT_EXEMPT = "drift-exempt"
    PURGE_USER = "purge-user"
    RESTORE_EVENTS = "restore-events"
    SESSION_SUBJECTS = "session-subjects"
    SUBJECTS_BY_SESSION = "subjects-by-session"
    ASSIGNS_SEQUENCES = "assigns-sequences"
    WRITE_TIME = "write-time"


@dataclass(frozen=True)
class CapabilitySpec:
    """Where a capability lives and how it shows. ``methods`` must all be callable;
    ``flag`` is a declared attribute whose absence means ``flag_default``; ``seam``
    marks the operator seams the CLI lists and detects on the adapter."""

    holder: str
    protocol: type
    methods: tuple[str, ...] = ()
    flag: str | None = None
    flag_default: bool = False
    seam: bool = False

    def offered_by(self, obj: Any) -> bool:
        """Whether ``obj`` (a class or an instance of the holder) offers this."""
        if obj is None:
            return False
        if not all(callable(getattr(obj, m, None)) for m in self.methods):
            return False
        if self.flag is None:
            return True
        value = getattr(obj, self.flag, self.flag_default)
        if self.flag == "fault_points":
            return isinstance(value, (set, frozenset)) and bool(value)
        return value is not False if self.flag_default else value is True


_A, _S, _E = "adapter", "state_store", "event_store"

#: Every capability, in the order reports list them.
CAPABILITIES: dict[Capability, CapabilitySpec] = {
    Capability.SESSIONS: CapabilitySpec(
        _A, SessionEnumerator, ("iter_sessions", "describe_session"), seam=True),
    Capability.RESTORE: CapabilitySpec(_A, SessionRestorer, ("restore_session",), seam=True),
    Capability.INDEXES: CapabilitySpec(
        _A, IndexManager, ("index_plan", "ensure_indexes", "validate_indexes"), seam=True),
    Capability.LIVE_ITEMS: CapabilitySpec(_A, LiveItemSource, ("iter_live_items",), seam=True),
    Capability.ITEM_MIRROR: CapabilitySpec(_A, ItemMirror, ("sync_items",), seam=True),
    Capability.HEALTH_DETAILS: CapabilitySpec(_A, HealthDetails, ("health_details",), seam=True),
    Capability.SEARCH_INDEX_WAIT: CapabilitySpec(
        _A, SearchIndexWaiter, ("wait_for_search_indexes",)),
    Capability.PURGE_ITEMS: CapabilitySpec(_A, ItemPurger, ("purge_items",)),
    Capability.SERVER_RETRIEVAL: CapabilitySpec(
        _A, ServerRetrieval, ("server_retriever",), seam=True),
    Capability.CLOSE: CapabilitySpec(_A, Closeable, ("close",)),
    Capability.FAULTS: CapabilitySpec(_A, FaultSeam, ("inject_fault",), flag="fault_points"),
    Capability.KEEPS_SESSION_TTL: CapabilitySpec(
        _A, ExpiryDeclaration, ("restore_session",), flag="keeps_session_ttl"),
    Capability.IDEMPOTENT_RETRIES: CapabilitySpec(
        _S, RetryDeclaration, flag="idempotent_retries"),
    Capability.BATCH_READS: CapabilitySpec(_S, BatchStateReader, ("load_full_many",)),
    Capability.DRIFT_EXEMPT: CapabilitySpec(_S, DriftExemption, ("set_drift_exempt",)),
    Capability.PURGE_USER: CapabilitySpec(_E, EventPurger, ("purge_user",)),
    Capability.RESTORE_EVENTS: CapabilitySpec(
        _E, EventRestorer, ("restore_events", "read_counter", "raise_counter")),
    Capability.SESSION_SUBJECTS: CapabilitySpec(_E, SessionSubjects, ("session_subjects",)),
    Capability.SUBJECTS_BY_SESSION: CapabilitySpec(
        _E, SubjectsBySession, ("subjects_by_session",)),
    Capability.ASSIGNS_SEQUENCES: CapabilitySpec(
        _E, SequenceDeclaration, flag="assigns_sequences", flag_default=True),
    Capability.WRITE_TIME: CapabilitySpec(_S, WriteTimeDeclaration, flag="records_write_time"),
}


def offers(obj: Any, capability: Capability) -> bool:
    """Whether ``obj`` (already the right holder: adapter, state store or event store)
    offers ``capability``."""
    return CAPABILITIES[capability].offered_by(obj)


def _holder(adapter: Any, name: str) -> Any:
    try:
        return getattr(adapter, name)()
    except Exception:  # noqa: BLE001 - a store that cannot be built offers nothing
        return None


def capabilities_of(adapter: Any, *, stores: bool = True) -> list[Capability]:
    """The capabilities an adapter offers, in :data:`CAPABILITIES` order.

    A class (nothing built) or ``stores=False`` answers for the adapter's own members
    only; an instance also asks its state and event stores. Never raises."""
    import inspect

    holders: dict[str, Any] = {_A: adapter}
    if stores and not inspect.isclass(adapter):
        holders[_S] = _holder(adapter, "state_store")
        holders[_E] = _holder(adapter, "event_store")
    return [cap for cap, spec in CAPABILITIES.items()
            if spec.holder in holders and spec.offered_by(holders[spec.holder])]


def server_retriever_of(adapter: Any) -> Any:
    """The adapter's server-side retriever through the :class:`ServerRetrieval` seam, or
    None (no seam, or the store cannot rank server-side). Never the engine's
    ``retrieval_backend()``: that one is the engine's, and in-process there."""
    if not offers(adapter, Capability.SERVER_RETRIEVAL):
        return None
    return adapter.server_retriever()


def fault_points_of(adapter: Any) -> frozenset[str]:
    """The fault points an adapter honours (empty without a fault seam)."""
    if not offers(adapter, Capability.FAULTS):
        return frozenset()
    return frozenset(adapter.fault_points)


def close_quietly(adapter: Any) -> None:
    """Close an adapter that offers ``close()``, swallowing what closing raises: used
    where the run is over and a close failure must not mask its result."""
    if offers(adapter, Capability.CLOSE):
        try:
            adapter.close()
        except Exception:  # noqa: BLE001
            pass
