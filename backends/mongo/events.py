"""Compliance events on MongoDB: ``compliance_events`` plus per-user counters in
``compliance_event_counters``, in the engine's exact shapes (ENGINE-WIRE §4).

Sequences are per user, 1-based and gap-free. Inside a transaction (commit_turn, or
append on a replica set) the counter increment and the inserts commit or roll back
together, so a failed turn leaves no gap. On a standalone, a single append increments
then inserts, and hands the number back if the insert fails.

Counters are ``{_id: user_id, value: n}`` (n = the last number handed out), as the
engine writes them. Earlier semvecctl releases wrote the field ``seq``; such a counter
is folded into ``value`` (``$max``, then ``$unset: seq``) by its next increment, so
numbers never go backwards and both sides count on one field from then on.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from backends.contract import (
    UNSCOPED,
    EngineEventSurface,
    MemoryEvent,
    OwnerFilter,
    speaks_both_conventions,
    validate_event,
)
from backends.errors import CorruptEvent, InvalidEvent, StateVersionConflict
from backends.contract.event_fields import strict_embedding, strict_meta
from backends.mongo.bulk import MongoEventBulk
from backends.mongo.errors import driver_errors
from backends.mongo.schema import COUNTERS_COLLECTION, EVENTS_COLLECTION
from backends.mongo.state import bson_utc, bson_time, owner_clause

#: The counter field the engine increments, and the one older semvecctl releases used.
COUNTER_FIELD = "value"
LEGACY_COUNTER_FIELD = "seq"


def _already_recorded() -> InvalidEvent:
    return InvalidEvent("an event with this event_id is already recorded")


def event_document(event: MemoryEvent) -> dict[str, Any]:
    """The engine's event document: ``_id`` = event_id, ``""`` for no owner or session,
    a list embedding (never null), source_event_id a string or null."""
    return {
        "_id": event.event_id,
        "event_id": event.event_id,
        "user_id": event.user_id,
        "owner_subject": event.owner_subject or "",
        "session_id": event.session_id or "",
        "created_at": bson_time(event.created_at),
        "content": event.content,
        "embedding": [float(x) for x in (event.embedding or ())],
        "meta": dict(event.meta),
        "source_event_id": event.source_event_id or None,
        "sequence": int(event.sequence),
    }


def event_from_document(doc: Mapping[str, Any]) -> MemoryEvent:
    """An event from its document, strictly: a missing user or time, a ``meta`` that is
    not a document, an ``embedding`` that is not an array of finite numbers or a
    ``sequence`` that is not an integer raises CorruptEvent naming the event and field."""
    event_id = str(doc.get("event_id") or doc.get("_id") or "?")
    user_id = doc.get("user_id")

    def damaged(field: str, problem: str) -> CorruptEvent:
        return CorruptEvent(event_id, field, problem,
                            user_id=user_id if isinstance(user_id, str) else None)

    if not isinstance(user_id, str) or not user_id:
        raise damaged("user_id", "is missing" if user_id in (None, "") else
                      f"is not a string ({type(user_id).__name__})")
    created = doc.get("created_at")
    if isinstance(created, str):
        stamp = created
        try:
            created = datetime.fromisoformat(stamp)
        except ValueError:
            raise damaged("created_at", f"is not an ISO-8601 time ({stamp[:40]!r})") from None
    if not isinstance(created, datetime):
        raise damaged("created_at", "is missing" if created is None else
                      f"is not a date ({type(created).__name__})")
    sequence = doc.get("sequence")
    if sequence in (None, ""):
        sequence = 0
    if isinstance(sequence, bool) or not isinstance(sequence, int):
        raise damaged("sequence", f"is not an integer ({sequence!r:.30})")
    record = dict(doc)
    record["event_id"] = doc.get("event_id") or event_id
    record["created_at"] = bson_utc(created) or created
    record["embedding"] = strict_embedding(doc.get("embedding"), event_id, user_id,
                                           text=False)
    record["meta"] = strict_meta(doc.get("meta"), event_id, user_id, text=False)
    record["sequence"] = sequence
    return MemoryEvent.from_dict(record)


def counter_value(doc: Mapping[str, Any] | None) -> int:
    """The last number a counter document handed out, whichever field holds it."""
    if not doc:
        return 0
    values = [doc.get(COUNTER_FIELD), doc.get(LEGACY_COUNTER_FIELD)]
    return max([int(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
               or [0])


@speaks_both_conventions
class MongoEventStore(MongoEventBulk, EngineEventSurface):
    """EventStore (ours and the engine's surface) over ``compliance_events``.
    ``transaction_runner`` returns a callable that runs a callback in a multi-document
    transaction, or None on a deployment that cannot."""

    #: what the batch members (:mod:`backends.mongo.bulk`) decode and encode with
    _from_document = staticmethod(lambda doc: event_from_document(doc))
    _to_document = staticmethod(lambda event: event_document(event))

    def __init__(self, database: Any,
                 transaction_runner: Callable[[], Callable[[Callable[[Any], Any]], Any] | None]) -> None:
        self._events = database[EVENTS_COLLECTION]
        self._counters = database[COUNTERS_COLLECTION]
        self._transaction_runner = transaction_runner

    @property
    def collection(self) -> Any:
        return self._events

    # -- counters -----------------------------------------------------------------------

    def _fold_legacy(self, user_id: str, kwargs: Mapping[str, Any]) -> None:
        """Move a legacy ``seq`` into ``value`` (never lowering it). The filter names the
        ``seq`` read, so of two concurrent folds only one applies, and both are harmless."""
        with driver_errors("events.counter_fold", events=True):
            doc = self._counters.find_one({"_id": user_id}, {LEGACY_COUNTER_FIELD: 1}, **kwargs)
            legacy = (doc or {}).get(LEGACY_COUNTER_FIELD)
            if legacy is None:
                return
            self._counters.update_one(
                {"_id": user_id, LEGACY_COUNTER_FIELD: legacy},
                {"$max": {COUNTER_FIELD: int(legacy)}, "$unset": {LEGACY_COUNTER_FIELD: ""}},
                **kwargs,
            )

    def _reserve(self, user_id: str, count: int, session: Any) -> int:
        """Advance the user's counter by ``count``; returns the first reserved sequence.

        One ``$inc`` in the common case. When the counter still carries a legacy ``seq``,
        the increment is followed by a fold guarded on what the increment returned:
        ``value`` becomes ``max(value, seq + count)`` and ``seq`` goes, so the numbers
        taken lie above both. If a concurrent writer moved the counter in between (only
        possible outside a transaction), the increment is abandoned as a gap, never
        reused, and the reservation starts again."""
        from pymongo import ReturnDocument

        kwargs = {"session": session} if session is not None else {}
        for _attempt in range(8):
            with driver_errors("events.counter", events=True):
                doc = self._counters.find_one_and_update(
                    {"_id": user_id},
                    {"$inc": {COUNTER_FIELD: count}},
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                    **kwargs,
                )
            legacy = doc.get(LEGACY_COUNTER_FIELD)
            if legacy is None:
                return int(doc[COUNTER_FIELD]) - count + 1
            with driver_errors("events.counter_fold", events=True):
                folded = self._counters.find_one_and_update(
                    {"_id": user_id, LEGACY_COUNTER_FIELD: legacy,
                     COUNTER_FIELD: doc[COUNTER_FIELD]},
                    {"$max": {COUNTER_FIELD: int(legacy) + count},
                     "$unset": {LEGACY_COUNTER_FIELD: ""}},
                    return_document=ReturnDocument.AFTER,
                    **kwargs,
                )
            if folded is not None:
                return int(folded[COUNTER_FIELD]) - count + 1
        from backends.errors import BackendTransient

        raise BackendTransient("the event counter kept changing under concurrent writers; retry")

    def read_counter(self, user_id: str) -> int:
        """The last sequence handed out to ``user_id`` (0 when none)."""
        with driver_errors("events.counter_read"):
            return counter_value(self._counters.find_one({"_id": user_id}))

    def raise_counter(self, user_id: str, value: int) -> int:
        """Set the counter to at least ``value`` (``$max``: never lowers it)."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError("counter value must be a non-negative int")
        from pymongo import ReturnDocument

        self._fold_legacy(user_id, {})
        with driver_errors("events.counter_raise"):
            doc = self._counters.find_one_and_update(
                {"_id": user_id}, {"$max": {COUNTER_FIELD: int(value)}}, upsert=True,
                return_document=ReturnDocument.AFTER)
        return counter_value(doc)

    # -- writes -------------------------------------------------------------------------

    def append_many(self, events: Sequence[MemoryEvent], *, session: Any) -> list[MemoryEvent]:
        """Assign sequences and insert, inside the caller's transaction ``session``.
        Events must already be validated."""
        by_user: "OrderedDict[str, list[int]]" = OrderedDict()
        for index, event in enumerate(events):
            by_user.setdefault(event.user_id, []).append(index)
        stamped: list[MemoryEvent | None] = [None] * len(events)
        for user_id, indexes in by_user.items():
            first = self._reserve(user_id, len(indexes), session)
            for offset, index in enumerate(indexes):
                stamped[index] = _as_stored(events[index], first + offset)
        done = [e for e in stamped if e is not None]
        if done:
            kwargs = {"session": session} if session is not None else {}
            with driver_errors("events.insert", events=True, on_duplicate=_already_recorded):
                self._events.insert_many([event_document(e) for e in done], ordered=True,
                                         **kwargs)
        return done

    def append(self, event: Any) -> MemoryEvent:
        event = validate_event(event)
        runner = self._transaction_runner()
        if runner is not None:
            return runner(lambda session: self.append_many([event], session=session))[0]
        return self._append_standalone(event)

    def _append_standalone(self, event: MemoryEvent) -> MemoryEvent:
        sequence = self._reserve(event.user_id, 1, None)
        stamped = _as_stored(event, sequence)
        try:
            with driver_errors("events.insert", events=True, on_duplicate=_already_recorded):
                self._events.insert_one(event_document(stamped))
        except BaseException:
            # Hand the number back, but only if nobody reserved after us: a gap is
            # better than two events sharing a sequence.
            with driver_errors("events.counter_release", events=True):
                self._counters.update_one({"_id": event.user_id, COUNTER_FIELD: sequence},
                                          {"$inc": {COUNTER_FIELD: -1}})
            raise
        return stamped

    def restore_events(self, events: Sequence[Any]) -> int:
        """Write events that keep their sequences (lossless import). An event id, or a
        (user, sequence) pair, that is already stored is a conflict and nothing is
        written. Each user's counter is raised to at least the highest restored
        sequence, so a later append continues after it instead of colliding."""
        checked: list[MemoryEvent] = []
        for raw in events:
            seq = getattr(raw, "sequence", 0)
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
                raise InvalidEvent("a restored event must carry its sequence (an int >= 1)")
            checked.append(replace(validate_event(replace(_as_event(raw), sequence=0)),
                                   sequence=seq))
        if not checked:
            return 0
        ids = [e.event_id for e in checked]
        pairs = {(e.user_id, e.sequence) for e in checked}
        if len(set(ids)) != len(ids) or len(pairs) != len(checked):
            raise InvalidEvent("restored events repeat an event id or a (user, sequence) pair")

        def write(session: Any) -> int:
            kwargs = {"session": session} if session is not None else {}
            with driver_errors("events.restore_check"):
                clash = self._events.find_one(
                    {"$or": [{"_id": {"$in": ids}},
                             *({"user_id": u, "sequence": n} for u, n in sorted(pairs))]},
                    {"_id": 1}, **kwargs)
            if clash is not None:
                raise StateVersionConflict(
                    "an event being restored is already stored (same event id or the same "
                    "user and sequence); nothing was restored")
            with driver_errors("events.restore", events=True,
                               on_duplicate=lambda: StateVersionConflict(
                                   "an event being restored is already stored")):
                self._events.insert_many([event_document(e) for e in checked], ordered=True,
                                         **kwargs)
            highest: dict[str, int] = {}
            for e in checked:
                highest[e.user_id] = max(highest.get(e.user_id, 0), e.sequence)
            for user_id, top in highest.items():
                self._fold_legacy(user_id, kwargs)
                with driver_errors("events.counter_raise"):
                    self._counters.update_one({"_id": user_id}, {"$max": {COUNTER_FIELD: top}},
                                              upsert=True, **kwargs)
            return len(checked)

        runner = self._transaction_runner()
        return runner(write) if runner is not None else write(None)

    # -- reads --------------------------------------------------------------------------

    def list_events(
        self,
        user_id: str,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        after_sequence: int = 0,
        limit: int | None = None,
    ) -> list[MemoryEvent]:
        """A user's events in sequence order; the owner filter runs in the query, before
        the limit."""
        flt = {"user_id": user_id, "sequence": {"$gt": int(after_sequence)},
               **owner_clause(owner_subject)}
        if limit is not None and limit <= 0:
            return []
        with driver_errors("events.list"):
            cursor = self._events.find(flt).sort("sequence", 1)
            if limit is not None:
                cursor = cursor.limit(int(limit))
            return [event_from_document(doc) for doc in cursor]

    def get_event(self, event_id: str, *,
                  owner_subject: OwnerFilter = UNSCOPED) -> MemoryEvent | None:
        flt = {"_id": str(event_id), **owner_clause(owner_subject)}
        with driver_errors("events.get"):
            doc = self._events.find_one(flt)
        return event_from_document(doc) if doc else None

    def count_for_user(self, user_id: str) -> int:
        with driver_errors("events.count"):
            return int(self._events.count_documents({"user_id": user_id}))

    def user_ids(self) -> set[str]:
        """Every user id with a log: one ``distinct`` on the events."""
        with driver_errors("events.user_ids"):
            return {str(u) for u in self._events.distinct("user_id")}

    def session_subjects(self, session_id: str, *,
                         owner_subject: OwnerFilter = UNSCOPED) -> list[str]:
        """The user ids with events in ``session_id`` (the engine's optional call)."""
        if not session_id:
            return []
        flt = {"session_id": session_id, **owner_clause(owner_subject)}
        with driver_errors("events.session_subjects"):
            return sorted(str(u) for u in self._events.distinct("user_id", flt))

    # -- deletes ------------------------------------------------------------------------

    def delete_event(self, event_id: str) -> bool:
        with driver_errors("events.delete"):
            return self._events.delete_one({"_id": str(event_id)}).deleted_count == 1

    def delete_events_before(self, cutoff: datetime, *, user_id: str | None = None) -> int:
        if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
            raise ValueError("cutoff must be a timezone-aware datetime")
        # Stored times have millisecond precision; truncating the cutoff the same way keeps
        # "strictly older" true for an event created at exactly the cutoff.
        flt: dict[str, Any] = {"created_at": {"$lt": bson_time(cutoff)}}
        if user_id is not None:
            flt["user_id"] = user_id
        with driver_errors("events.delete_older_than"):
            return int(self._events.delete_many(flt).deleted_count)

    def event_refs(self, user_id: str) -> list[tuple[str, str | None, str | None, str | None]]:
        """Every event document of the user, read raw (for erasure): tuples ``(event_id,
        owner_subject, session_id, problem)``, ``problem`` saying why the document cannot
        be decoded (None when it can)."""
        refs: list[tuple[str, str | None, str | None, str | None]] = []
        with driver_errors("events.refs"):
            docs = list(self._events.find({"user_id": user_id}).sort("sequence", 1))
        for doc in docs:
            try:
                event_from_document(doc)
                problem = None
            except CorruptEvent as exc:  # the strict decoder names the event and the field
                problem = str(exc)
            except (ValueError, TypeError, KeyError) as exc:
                problem = f"event {str(doc.get('_id'))!r} cannot be decoded: {type(exc).__name__}: {exc}"
            refs.append((str(doc.get("_id")), doc.get("owner_subject") or "",
                         doc.get("session_id") or "", problem))
        return refs

    def purge_user(self, user_id: str) -> int:
        """Erase a user: their events AND their sequence counter, so a next event starts
        again at 1. In one transaction where the deployment has them; on a standalone the
        events go first, so an interruption never leaves events behind a reset counter."""
        if not isinstance(user_id, str) or not user_id:
            raise ValueError("user_id must be a non-empty string")

        def purge(session: Any) -> int:
            kwargs = {"session": session} if session is not None else {}
            with driver_errors("events.purge_user"):
                removed = self._events.delete_many({"user_id": user_id}, **kwargs).deleted_count
                self._counters.delete_one({"_id": user_id}, **kwargs)
            return int(removed)

        runner = self._transaction_runner()
        return runner(purge) if runner is not None else purge(None)


def _as_stored(event: MemoryEvent, sequence: int) -> MemoryEvent:
    """The event as it reads back: its sequence, and BSON's millisecond timestamp."""
    return replace(event, sequence=sequence,
                   created_at=bson_time(event.created_at))  # type: ignore[arg-type]


def _as_event(raw: Any) -> MemoryEvent:
    from backends.contract import coerce_event

    return coerce_event(raw)
