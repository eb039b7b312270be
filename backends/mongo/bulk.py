"""Set-based reads and writes for a transfer's batches (the ``bulk`` role: the same file
in every backend): a batch of users' logs, of events by id and of counters in one
``find`` each, counters raised with one ``bulk_write``, and a batch of numbered events
written with one clash query and one ``insert_many`` (in one transaction where the
deployment runs them), each clash held back alone. Mixed into the event store
(:class:`~backends.contract.defaults.EventStoreDefaults` gives the slow default).

Tested on ``mongomock`` (the suite's double: no real MongoDB runs on our machines)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from backends.contract import UNSCOPED, MemoryEvent, OwnerFilter, validate_event
from backends.errors import InvalidEvent
from backends.mongo.errors import driver_errors
from backends.mongo.state import owner_clause

_COUNTER, _LEGACY = "value", "seq"


class MongoEventBulk:
    """The batch members of :class:`~backends.mongo.events.MongoEventStore`."""

    _events: Any
    _counters: Any
    _transaction_runner: Callable[[], Any]
    #: set by the store: its strict document decoder and encoder
    _from_document: Any
    _to_document: Any

    def events_of_users(self, user_ids: Sequence[str], *,
                        owner_subject: OwnerFilter = UNSCOPED) -> dict[str, list[MemoryEvent]]:
        """Each user's log in sequence order, one ``find`` for the batch."""
        users = list(dict.fromkeys(user_ids))
        logs: dict[str, list[MemoryEvent]] = {u: [] for u in users}
        with driver_errors("events.list"):
            cursor = self._events.find({"user_id": {"$in": users}, **owner_clause(owner_subject)}
                                       ).sort([("user_id", 1), ("sequence", 1)])
            for doc in cursor:
                logs[doc["user_id"]].append(self._from_document(doc))
        return logs

    def events_by_ids(self, event_ids: Sequence[str]) -> dict[str, MemoryEvent]:
        ids = list(dict.fromkeys(str(i) for i in event_ids))
        with driver_errors("events.get"):
            return {doc["_id"]: self._from_document(doc)
                    for doc in self._events.find({"_id": {"$in": ids}})}

    def read_counters(self, user_ids: Sequence[str]) -> dict[str, int]:
        users = list(dict.fromkeys(user_ids))
        with driver_errors("events.counter_read"):
            docs = {d["_id"]: d for d in self._counters.find({"_id": {"$in": users}})}
        return {u: max(int(docs.get(u, {}).get(_COUNTER, 0) or 0),
                       int(docs.get(u, {}).get(_LEGACY, 0) or 0)) for u in users}

    def raise_counters(self, values: Mapping[str, int], *, session: Any = None) -> None:
        """Each counter raised to at least its value (``$max``, a legacy ``seq`` folded
        in), one ``bulk_write``."""
        from pymongo import UpdateOne

        wanted = {u: int(v) for u, v in values.items() if v > 0}
        if not wanted:
            return
        kwargs = {"session": session} if session is not None else {}
        with driver_errors("events.counter_raise"):
            legacy = {d["_id"]: int(d[_LEGACY]) for d in self._counters.find(
                {"_id": {"$in": list(wanted)}, _LEGACY: {"$exists": True}}, **kwargs)}
            self._counters.bulk_write([UpdateOne(
                {"_id": u}, {"$max": {_COUNTER: max(v, legacy.get(u, 0))},
                             **({"$unset": {_LEGACY: ""}} if u in legacy else {})}, upsert=True)
                for u, v in wanted.items()], ordered=False, **kwargs)

    def restore_event_batch(self, events: Sequence[MemoryEvent]) -> set[str]:
        """Numbered events written, those whose id or (user, sequence) is stored (or
        repeated earlier in the batch) skipped and returned; counters raised."""
        checked = []
        for raw in events:
            seq = raw.sequence
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
                raise InvalidEvent("a restored event must carry its sequence (an int >= 1)")
            checked.append(replace(validate_event(replace(raw, sequence=0)), sequence=seq))
        if not checked:
            return set()

        def write(session: Any) -> set[str]:
            kwargs = {"session": session} if session is not None else {}
            users = list({e.user_id for e in checked})
            with driver_errors("events.restore_check"):
                taken = list(self._events.find(
                    {"$or": [{"_id": {"$in": [e.event_id for e in checked]}},
                             {"user_id": {"$in": users},
                              "sequence": {"$in": sorted({e.sequence for e in checked})}}]},
                    {"_id": 1, "user_id": 1, "sequence": 1}, **kwargs))
            ids = {d["_id"] for d in taken}
            slots = {(d["user_id"], d["sequence"]) for d in taken}
            keep, clashes = [], set()
            for e in checked:
                if e.event_id in ids or (e.user_id, e.sequence) in slots:
                    clashes.add(e.event_id)
                else:
                    keep.append(e)
                    ids.add(e.event_id)
                    slots.add((e.user_id, e.sequence))
            if keep:
                with driver_errors("events.restore", events=True):
                    self._events.insert_many([self._to_document(e) for e in keep], ordered=True,
                                             **kwargs)
                top: dict[str, int] = {}
                for e in keep:
                    top[e.user_id] = max(top.get(e.user_id, 0), e.sequence)
                self.raise_counters(top, session=session)
            return clashes

        runner = self._transaction_runner()
        return runner(write) if runner is not None else write(None)
