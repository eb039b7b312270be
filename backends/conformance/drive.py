"""Drive an adapter in whichever convention it speaks, so a case states its intent once.

Adapters come in two conventions (ENGINE-WIRE §1-2):

* ours (the spec's): ``owner_subject=`` with three states on reads (omitted = unscoped,
  ``None`` = unowned rows only, a string = that owner) and the event surface
  ``list_events`` / ``get_event`` / ``delete_older_than(cutoff, *, user_id=)``;
* the engine's: ``scope=`` (an object with an ``owner_subject`` string, or None; on reads
  None = unscoped) and the event surface ``get`` / ``list_by_user`` / ``count_for_user`` /
  ``delete`` / ``delete_by_user`` / ``delete_older_than(user_id, cutoff)`` /
  ``query_by_user``.

The convention is read from each method's signature (a method may take neither: the
engine calls ``load_owner`` and ``current_version`` with the session id alone). A case
speaks ours; the drivers here translate. What one convention cannot express (the
engine has no "unowned rows only" read, no owner filter on its event listing) raises
:class:`SubCheckNotApplicable`, which skips that step with a note and never fails it.

Events handed to an adapter are :class:`WireEvent`: the engine's shape (UUID objects,
a list embedding, ``""`` for unowned), which our stores accept too (``coerce_event``).
"""

from __future__ import annotations

import inspect
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping

from backends.conformance.model import SubCheckNotApplicable
from backends.contract import as_utc, event_defaults
from backends.contract.owner import UNSCOPED, OwnerScope

#: Conventions a method can speak.
SPEC, SCOPE, NO_OWNER = "owner_subject", "scope", "none"

OUR_EVENT_CALLS = ("append", "list_events", "get_event", "delete_older_than")
ENGINE_EVENT_CALLS = ("append", "get", "list_by_user", "count_for_user", "delete",
                       "delete_by_user", "delete_older_than", "query_by_user")


def owner_convention(method: Any) -> str:
    """``owner_subject`` when the method takes it (or ``**kwargs``), else ``scope`` when
    it takes that, else ``none``. A method that takes both is driven the spec's way,
    which can say more (three states on reads)."""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return SPEC
    if SPEC in params:
        return SPEC
    if SCOPE in params:
        return SCOPE
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return SPEC
    return NO_OWNER


def takes_keyword(method: Any, name: str) -> bool:
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return True
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


@dataclass(frozen=True)
class RawScope:
    """A scope carrying an owner string no well-formed scope can (``""``): what a caller
    that builds scopes from unchecked input hands over (the isolation cases try it)."""

    owner_subject: str


def scope_for(owner: str) -> Any:
    """The owner-scope object the engine would pass for an owner string."""
    decoded = OwnerScope.decode(owner)
    return RawScope(owner) if decoded is None else decoded


def owner_kwargs(method: Any, owner: Any, *, read: bool) -> dict[str, Any]:
    """Keyword arguments that say ``owner`` to ``method`` in its own convention.

    ``owner`` is the suite's intent: UNSCOPED (omitted), None (reads: unowned rows only;
    writes: no owner) or an owner string.
    """
    if owner is UNSCOPED:
        return {}
    name = getattr(method, "__name__", "the method")
    convention = owner_convention(method)
    if convention == SPEC:
        return {SPEC: owner}
    if convention == SCOPE:
        if owner is None:
            if read:
                raise SubCheckNotApplicable(
                    f"{name}() takes scope= (the engine's convention), which has no "
                    "'unowned rows only' read (scope=None means unscoped)")
            return {SCOPE: None}
        return {SCOPE: scope_for(owner)}
    if owner is None and not read:
        return {}
    raise SubCheckNotApplicable(f"{name}() takes no owner (the engine calls it with the "
                                "session id alone), so it has no owner filter to check")


class StoreDriver:
    """A state store, called in the suite's terms whatever convention it speaks."""

    def __init__(self, store: Any) -> None:
        self.raw = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)

    @property
    def convention(self) -> str:
        return owner_convention(self.raw.save)

    def save(self, session_id: str, blob: bytes, *, expected_version: int | None,
             owner_subject: str | None = None, pending_message: str | None = None) -> int:
        method = self.raw.save
        kwargs = owner_kwargs(method, owner_subject, read=False)
        if pending_message is not None:
            kwargs["pending_message"] = pending_message
        return method(session_id, blob, expected_version=expected_version, **kwargs)

    def _read(self, name: str, session_id: str, owner_subject: Any) -> Any:
        method = getattr(self.raw, name)
        return method(session_id, **owner_kwargs(method, owner_subject, read=True))

    def load(self, session_id: str, *, owner_subject: Any = UNSCOPED) -> Any:
        return self._read("load", session_id, owner_subject)

    def load_full(self, session_id: str, *, owner_subject: Any = UNSCOPED) -> Any:
        return self._read("load_full", session_id, owner_subject)

    def load_owner(self, session_id: str, *, owner_subject: Any = UNSCOPED) -> Any:
        return self._read("load_owner", session_id, owner_subject)

    def current_version(self, session_id: str, *, owner_subject: Any = UNSCOPED) -> Any:
        return self._read("current_version", session_id, owner_subject)

    @property
    def deletes_by_version(self) -> bool:
        return takes_keyword(self.raw.delete, "expected_version")

    def delete(self, session_id: str, *, owner_subject: Any = UNSCOPED,
               expected_version: int | None = None) -> Any:
        method = self.raw.delete
        kwargs = owner_kwargs(method, owner_subject, read=True)
        if expected_version is not None:
            if not self.deletes_by_version:
                raise SubCheckNotApplicable("delete() takes no expected_version")
            kwargs["expected_version"] = expected_version
        return method(session_id, **kwargs)


def commit_turn(adapter: Any, session_id: str, blob: bytes, *,
                expected_version: int | None, owner_subject: str | None = None,
                pending_message: str | None = None, events: Any = None) -> Any:
    """``adapter.commit_turn`` in the adapter's own convention."""
    method = adapter.commit_turn
    kwargs = owner_kwargs(method, owner_subject, read=False)
    if pending_message is not None:
        kwargs["pending_message"] = pending_message
    if events is not None:
        kwargs["events"] = events
    return method(session_id, blob, expected_version=expected_version, **kwargs)


def event_surface(events: Any) -> str | None:
    """``ours`` or ``engine`` (the first one complete), or None when neither is."""
    if all(callable(getattr(events, m, None)) for m in OUR_EVENT_CALLS):
        return "ours"
    if all(callable(getattr(events, m, None)) for m in ENGINE_EVENT_CALLS):
        return "engine"
    return None


def missing_event_calls(events: Any) -> dict[str, list[str]]:
    """Per surface, the calls the event store lacks (for the contract group's message)."""
    return {name: [m for m in calls if not callable(getattr(events, m, None))]
            for name, calls in (("ours", OUR_EVENT_CALLS), ("engine", ENGINE_EVENT_CALLS))}


class EventsDriver:
    """An event store, called in the suite's terms (our surface) over whichever surface
    it offers. Steps the engine's surface cannot express raise SubCheckNotApplicable."""

    def __init__(self, events: Any) -> None:
        self.raw = events
        self.surface = event_surface(events) or "ours"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)

    @property
    def engine(self) -> bool:
        return self.surface == "engine"

    @property
    def assigns_sequences(self) -> bool:
        """False when the store declares it keeps no per-user sequence (the engine's
        SQL layout has no sequence column)."""
        return event_defaults(self.raw).assigns_sequences

    def append(self, event: Any) -> Any:
        return self.raw.append(event)

    def list_events(self, user_id: str, *, owner_subject: Any = UNSCOPED,
                    after_sequence: int | None = None, limit: int | None = None) -> list:
        if not self.engine:
            kwargs: dict[str, Any] = {}
            if owner_subject is not UNSCOPED:
                kwargs["owner_subject"] = owner_subject
            if after_sequence is not None:
                kwargs["after_sequence"] = after_sequence
            if limit is not None:
                kwargs["limit"] = limit
            return list(self.raw.list_events(user_id, **kwargs))
        if owner_subject is not UNSCOPED:
            raise SubCheckNotApplicable("the engine's list_by_user(user_id) has no owner filter")
        if after_sequence is not None or limit is not None:
            raise SubCheckNotApplicable(
                "the engine's list_by_user(user_id) takes no after_sequence or limit")
        return list(self.raw.list_by_user(user_id))

    def get_event(self, event_id: Any, *, owner_subject: Any = UNSCOPED) -> Any:
        if not self.engine:
            kwargs = {} if owner_subject is UNSCOPED else {"owner_subject": owner_subject}
            return self.raw.get_event(str(event_id), **kwargs)
        if owner_subject is not UNSCOPED:
            raise SubCheckNotApplicable("the engine's get(event_id) has no owner filter")
        return self.raw.get(event_id if isinstance(event_id, uuid.UUID)
                            else uuid.UUID(str(event_id)))

    def delete_older_than(self, cutoff: datetime, *, user_id: str) -> int:
        if self.engine:
            return self.raw.delete_older_than(user_id, cutoff)
        return self.raw.delete_older_than(cutoff, user_id=user_id)

    @property
    def looks_up_by_id(self) -> bool:
        """Whether one event can be read by its id (ours ``get_event``, the engine's ``get``)."""
        return callable(getattr(self.raw, "get" if self.engine else "get_event", None))

    @property
    def deletes_by_id(self) -> bool:
        """Whether one event can be deleted by its id (ours ``delete_event``, the
        engine's ``delete``)."""
        name = "delete" if self.engine else "delete_event"
        return callable(getattr(self.raw, name, None))

    def delete_event(self, event_id: Any) -> Any:
        """Delete one event by id, whatever indexes still lead to it."""
        if self.engine:
            return self.raw.delete(event_id if isinstance(event_id, uuid.UUID)
                                   else uuid.UUID(str(event_id)))
        return self.raw.delete_event(str(event_id))

    def purge(self, user_id: str) -> Any:
        """Every trace of the user (events, indexes, counter), when the store can."""
        for name in ("purge_user", "delete_by_user"):
            method = getattr(self.raw, name, None)
            if callable(method):
                return method(user_id)
        return None


def event_id_text(event: Any) -> str:
    return str(event.event_id)


@dataclass(frozen=True)
class WireEvent:
    """An event as the engine hands it to an adapter (ENGINE-WIRE §2): UUID objects,
    a list embedding, ``""`` for no owner and no session, sequence 0 until the store
    assigns one. Our stores read it through ``coerce_event``; engine-style stores read
    it as their own."""

    event_id: uuid.UUID
    user_id: str
    content: str
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    embedding: Any = field(default_factory=list)
    meta: Mapping[str, Any] = field(default_factory=dict)
    source_event_id: uuid.UUID | None = None
    sequence: int = 0
    owner_subject: str = ""
    session_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The engine's keys and order; ``sequence`` is the store's, so it is left out."""
        return {
            "event_id": str(self.event_id),
            "user_id": self.user_id,
            "created_at": self.created_at.astimezone(timezone.utc).isoformat(),
            "content": self.content,
            "embedding": list(self.embedding),
            "meta": dict(self.meta),
            "owner_subject": self.owner_subject,
            "session_id": self.session_id,
            "source_event_id": None if self.source_event_id is None else str(self.source_event_id),
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "WireEvent":
        created = record["created_at"]
        created = as_utc(datetime.fromisoformat(created) if isinstance(created, str) else created)
        source = record.get("source_event_id")
        return cls(event_id=uuid.UUID(str(record["event_id"])), user_id=record["user_id"],
                   content=record.get("content") or "", created_at=created,
                   embedding=list(record.get("embedding") or []),
                   meta=dict(record.get("meta") or {}),
                   source_event_id=uuid.UUID(str(source)) if source else None,
                   sequence=int(record.get("sequence") or 0),
                   owner_subject=record.get("owner_subject") or "",
                   session_id=record.get("session_id") or "")
