"""The required contract: the protocols every adapter, state store, event store and
retriever satisfies, and the adapter members the registry checks (derived from
:class:`BackendAdapter`, not listed twice)."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

from backends.contract.values import (LoadedState, MemoryEvent, MemoryUnit, RetrievalContext)
from backends.contract.owner import UNSCOPED, OwnerFilter


def protocol_members(protocol: type) -> tuple[tuple[str, bool], ...]:
    """A protocol's members as ``(name, must be callable)``, in declaration order (data
    members, then methods, base protocols first); the one reading of a protocol that
    :data:`REQUIRED_ADAPTER_MEMBERS` and the capability table share."""
    found: dict[str, bool] = {}
    for klass in reversed(protocol.__mro__):
        if klass in (object, Protocol) or not getattr(klass, "_is_protocol", False):
            continue
        for name in klass.__dict__.get("__annotations__", {}):
            if not name.startswith("_"):
                found.setdefault(name, False)
        for name, value in klass.__dict__.items():
            if not name.startswith("_") and callable(value):
                found[name] = True
    return tuple(found.items())


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


#: Members the registry checks on every adapter, as ``(name, must be callable)``, read
#: from :class:`BackendAdapter`. The registry imports this lazily, when it checks an
#: adapter, so listing stays cheap.
REQUIRED_ADAPTER_MEMBERS: tuple[tuple[str, bool], ...] = protocol_members(BackendAdapter)
