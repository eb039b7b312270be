"""The contract's value types: what a store reads and writes (sessions, events, items,
index reports). Plain data, no I/O; checked by :mod:`backends.contract.validation`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Callable, NamedTuple, Sequence

from backends.errors import InvalidEvent
from backends.contract.owner import UNSCOPED, OwnerFilter


def as_utc(value: datetime) -> datetime:
    """An aware UTC datetime. A naive one is read as UTC: the engine stores UTC wall time
    (SQL TIMESTAMP, BSON dates, older event records), so that is what naive means here."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


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

    @classmethod
    def decoded(cls, *, event_id: Any, user_id: Any, content: Any, created_at: datetime,
                embedding: Any, meta: Mapping[str, Any], source_event_id: Any,
                owner_subject: Any, session_id: Any) -> "MemoryEvent":
        """``cls(...)`` with sequence 0, for a store's decoder (an export reads hundreds of
        thousands of rows): values already in the shape construction folds to (str ids,
        no ``""`` source, a tuple embedding, str owner and session) are set as they are;
        anything else is folded by construction."""
        if (type(event_id) is not str or type(embedding) is not tuple
                or type(owner_subject) is not str or type(session_id) is not str
                or not (source_event_id is None or (type(source_event_id) is str
                                                    and source_event_id))):
            return cls(event_id=event_id, user_id=user_id, content=content,
                       created_at=created_at, embedding=embedding, meta=meta,
                       source_event_id=source_event_id, owner_subject=owner_subject,
                       session_id=session_id)
        event = object.__new__(cls)
        event.__dict__.update(event_id=event_id, user_id=user_id, content=content,
                              created_at=created_at, embedding=embedding, meta=meta,
                              source_event_id=source_event_id, sequence=0,
                              owner_subject=owner_subject, session_id=session_id)
        return event

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
            "embedding": list(map(float, self.embedding)),
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
class LogShape:
    """One user's event log as ``semvecctl stats`` sees it: how many events, and how many
    were created on each UTC day (``YYYY-MM-DD`` -> count); never the events themselves."""

    user_id: str
    events: int
    per_day: Mapping[str, int] = field(default_factory=dict)


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


class LedgerKey(NamedTuple):
    """A secret of an erasure ledger: ``own`` for the store's own (made on first use),
    else one carried in with entries keyed under it (a copy or migration from a store
    whose secret differs). ``key_id`` names it without revealing it."""

    key_id: str
    secret: bytes
    own: bool

    def __repr__(self) -> str:  # the secret is never shown
        return f"LedgerKey(key_id={self.key_id!r}, own={self.own})"


class StoreIdentity(NamedTuple):
    """A store's identity, made once and kept with its erasure ledger (on a sharded SQL
    deployment, on the primary: one for the deployment): an archive names the store it
    came from by it. ``created_at`` is the store's clock when it was made."""

    identity: str
    created_at: datetime


class LedgerEntry(NamedTuple):
    """One erased subject: HMAC-SHA256 (hex) of the subject under the key ``key_id``, the
    erasure time (aware UTC, the store's clock) and the receipt's reference (its digest),
    or None. Never the ids themselves. ``sessions``: keyed hashes (same key) of the session
    ids the erasure removed, so an archive without events is withheld by session too.
    ``seq``: the entry's position in the store's ledger (given by the store when it first
    records the subject; 0 for an entry made before positions existed), which a ledger
    state names (:mod:`backends.contract.ledger`)."""

    key_id: str
    digest: str
    erased_at: datetime
    receipt: str | None = None
    sessions: tuple[str, ...] = ()
    seq: int = 0
