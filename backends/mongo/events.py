"""Compliance events on MongoDB: ``compliance_events`` plus per-user counters in
``compliance_event_counters``.

Sequences are per user, 1-based and gap-free. Inside a transaction (commit_turn, or
append on a replica set) the counter increment and the inserts commit or roll back
together, so a failed turn leaves no gap. On a standalone, a single append increments
then inserts, and hands the number back if the insert fails.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from backends.contract import UNSCOPED, MemoryEvent, OwnerFilter, validate_event
from backends.errors import InvalidEvent
from backends.mongo.errors import driver_errors
from backends.mongo.names import COUNTERS_COLLECTION, EVENTS_COLLECTION
from backends.mongo.state import as_utc, bson_time, owner_clause


def _already_recorded() -> InvalidEvent:
    return InvalidEvent("an event with this event_id is already recorded")


def event_document(event: MemoryEvent) -> dict[str, Any]:
    return {
        "_id": event.event_id,
        "event_id": event.event_id,
        "user_id": event.user_id,
        "owner_subject": event.owner_subject,
        "session_id": event.session_id,
        "created_at": bson_time(event.created_at),
        "content": event.content,
        "embedding": [float(x) for x in event.embedding] if event.embedding is not None else None,
        "meta": dict(event.meta),
        "source_event_id": event.source_event_id,
        "sequence": event.sequence,
    }


def event_from_document(doc: Mapping[str, Any]) -> MemoryEvent:
    record = dict(doc)
    record["created_at"] = as_utc(doc.get("created_at")) or doc.get("created_at")
    return MemoryEvent.from_dict(record)


class MongoEventStore:
    """EventStore over ``compliance_events``. ``transaction_runner`` runs a callback in
    a multi-document transaction, or is None on a deployment that cannot."""

    def __init__(self, database: Any,
                 transaction_runner: Callable[[], Callable[[Callable[[Any], Any]], Any] | None]) -> None:
        self._events = database[EVENTS_COLLECTION]
        self._counters = database[COUNTERS_COLLECTION]
        self._transaction_runner = transaction_runner

    @property
    def collection(self) -> Any:
        return self._events

    def _reserve(self, user_id: str, count: int, session: Any) -> int:
        """Advance the user's counter by ``count``; returns the first reserved sequence."""
        from pymongo import ReturnDocument

        kwargs = {"session": session} if session is not None else {}
        with driver_errors("events.counter", events=True):
            doc = self._counters.find_one_and_update(
                {"_id": user_id},
                {"$inc": {"seq": count}},
                upsert=True,
                return_document=ReturnDocument.AFTER,
                **kwargs,
            )
        return int(doc["seq"]) - count + 1

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
                stamped[index] = events[index].with_sequence(first + offset)
        done = [e for e in stamped if e is not None]
        if done:
            with driver_errors("events.insert", events=True, on_duplicate=_already_recorded):
                self._events.insert_many([event_document(e) for e in done], ordered=True,
                                         session=session)
        return done

    def append(self, event: MemoryEvent) -> MemoryEvent:
        validate_event(event)
        runner = self._transaction_runner()
        if runner is not None:
            return runner(lambda session: self.append_many([event], session=session))[0]
        return self._append_standalone(event)

    def _append_standalone(self, event: MemoryEvent) -> MemoryEvent:
        sequence = self._reserve(event.user_id, 1, None)
        stamped = event.with_sequence(sequence)
        try:
            with driver_errors("events.insert", events=True, on_duplicate=_already_recorded):
                self._events.insert_one(event_document(stamped))
        except BaseException:
            # Hand the number back, but only if nobody reserved after us: a gap is
            # better than two events sharing a sequence.
            with driver_errors("events.counter_release", events=True):
                self._counters.update_one({"_id": event.user_id, "seq": sequence},
                                          {"$inc": {"seq": -1}})
            raise
        return stamped

    def list_events(
        self,
        user_id: str,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        after_sequence: int = 0,
        limit: int | None = None,
    ) -> list[MemoryEvent]:
        flt = {"user_id": user_id, "sequence": {"$gt": int(after_sequence)},
               **owner_clause(owner_subject)}
        with driver_errors("events.list"):
            cursor = self._events.find(flt).sort("sequence", 1)
            if limit is not None:
                if limit <= 0:
                    return []
                cursor = cursor.limit(int(limit))
            return [event_from_document(doc) for doc in cursor]

    def get_event(self, event_id: str) -> MemoryEvent | None:
        with driver_errors("events.get"):
            doc = self._events.find_one({"_id": event_id})
        return event_from_document(doc) if doc else None

    def delete_older_than(self, cutoff: datetime, *, user_id: str | None = None) -> int:
        if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
            raise ValueError("cutoff must be a timezone-aware datetime")
        # Stored times have millisecond precision; truncating the cutoff the same way keeps
        # "strictly older" true for an event created at exactly the cutoff.
        flt: dict[str, Any] = {"created_at": {"$lt": bson_time(cutoff)}}
        if user_id is not None:
            flt["user_id"] = user_id
        with driver_errors("events.delete_older_than"):
            return int(self._events.delete_many(flt).deleted_count)

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

