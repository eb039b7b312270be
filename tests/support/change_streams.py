"""A test double of MongoDB change streams, over mongomock.

No MongoDB server can run on our machines and mongomock has no change streams, so the
Mongo change feed is tested against this stand-in. :class:`ChangeStreamClient` is the
replica-set stand-in of :mod:`tests.support.fixtures.mongo` (a replica-set ``hello``,
snapshot transactions) whose collections record a change event for every document a
write inserted, changed or deleted. The changes are found by comparing the collection
before and after the write, so an update that changes nothing records nothing, as on a
real server; a transaction's changes are recorded at its commit and dropped on abort.
``watch(pipeline)`` opens a stream at the end of that log; the stream runs the pipeline
through mongomock's aggregation, refuses stages a change stream refuses, and answers
``try_next`` / ``alive`` / ``close`` as pymongo's ``ChangeStream`` does (an
``invalidate`` is handed out, then the stream is closed).

Faults a test injects (``client.changes``): ``lose_history()`` (the next ``try_next`` of
every open stream raises OperationFailure 286, ChangeStreamHistoryLost, and closes it,
as pymongo closes a stream after a fatal error), ``fail_streams(exc)`` (any error,
e.g. a network error pymongo could not resume from), ``refuse_watch`` (``watch``
raises it); dropping a collection records ``drop`` then ``invalidate``.

Not modelled: resume tokens across a reconnect (pymongo's own), sharding, the delay
until a write is majority-committed, a bulk ``ReplaceOne`` (recorded as an update).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.support.fixtures.mongo import (
    FakeSession,
    TransactionalFakeClient,
    _Database,
    _SessionCheckedCollection,
)

#: collection methods that write, and those among them that replace a whole document
WRITES = frozenset({"insert_one", "insert_many", "update_one", "update_many", "replace_one",
                    "delete_one", "delete_many", "find_one_and_update", "find_one_and_replace",
                    "find_one_and_delete", "bulk_write", "drop"})
REPLACES = frozenset({"replace_one", "find_one_and_replace"})
#: the stages a change stream's pipeline may hold
STAGES = frozenset({"$match", "$project", "$addFields", "$set", "$unset", "$replaceRoot",
                    "$replaceWith", "$redact"})


def history_lost() -> Exception:
    from pymongo.errors import OperationFailure

    return OperationFailure("Resume of change stream was not possible, as the resume point "
                            "may no longer be in the oplog.", code=286,
                            details={"codeName": "ChangeStreamHistoryLost"})


class ChangeLog:
    """The oplog of the double: ``(database, collection, change)`` in commit order."""

    def __init__(self, client: "ChangeStreamClient") -> None:
        self._client = client
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.streams: list[FakeChangeStream] = []
        self.watched: list[tuple[str, str, list[dict[str, Any]], dict[str, Any]]] = []
        self.refuse_watch: Exception | None = None
        self._token = 0

    def record(self, db: str, coll: str, changes: list[dict[str, Any]]) -> None:
        with self._client.lock:
            for change in changes:
                self._token += 1
                self.events.append((db, coll, {"_id": {"_data": f"{self._token:016x}"},
                                               **change, "ns": {"db": db, "coll": coll}}))

    def lose_history(self) -> None:
        self.fail_streams(history_lost())

    def fail_streams(self, exc: Exception) -> None:
        for stream in self.streams:
            if stream.alive:
                stream.fail = exc

    def open(self, collection: Any, pipeline: list[dict[str, Any]], kwargs: dict[str, Any]
             ) -> "FakeChangeStream":
        from pymongo.errors import OperationFailure

        if self.refuse_watch is not None:
            raise self.refuse_watch
        for stage in pipeline:
            bad = set(stage) - STAGES
            if bad:
                raise OperationFailure(f"{sorted(bad)[0]} is not permitted in a $changeStream "
                                       "pipeline", code=40602)
        ns = (collection.database.name, collection.name)
        with self._client.lock:
            self.watched.append((*ns, copy.deepcopy(pipeline), dict(kwargs)))
            stream = FakeChangeStream(self, ns, pipeline, start=len(self.events))
            self.streams.append(stream)
        return stream


class FakeChangeStream:
    """One stream: the changes of its namespace recorded after it was opened."""

    def __init__(self, log: ChangeLog, ns: tuple[str, str], pipeline: list[dict[str, Any]],
                 *, start: int) -> None:
        self._log, self._ns, self._pipeline = log, ns, copy.deepcopy(pipeline)
        self._position = start
        self.alive = True
        self.fail: Exception | None = None

    def try_next(self) -> dict[str, Any] | None:
        from mongomock.aggregate import process_pipeline
        from pymongo.errors import InvalidOperation

        if not self.alive:
            return None
        if self.fail is not None:
            exc, self.fail = self.fail, None
            self.alive = False
            raise exc
        with self._log._client.lock:
            while self._position < len(self._log.events):
                db, coll, change = self._log.events[self._position]
                self._position += 1
                if (db, coll) != self._ns:
                    continue
                if change["operationType"] == "invalidate":
                    self.alive = False
                out = list(process_pipeline([copy.deepcopy(change)], None, self._pipeline, None))
                if not out:
                    if not self.alive:
                        return None
                    continue
                if "_id" not in out[0]:
                    self.alive = False
                    raise InvalidOperation("Cannot provide resume functionality when the "
                                           "resume token is missing.")
                return out[0]
        return None

    def close(self) -> None:
        self.alive = False


def _key(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def _diff(before: dict[Any, dict[str, Any]], after: dict[Any, dict[str, Any]],
          method: str) -> list[dict[str, Any]]:
    """The change events of one write, as a server records them."""
    if method == "drop":
        return [{"operationType": "drop"}, {"operationType": "invalidate"}] if before else []
    changes: list[dict[str, Any]] = []
    for key, doc in after.items():
        old = before.get(key)
        key_doc = {"_id": doc["_id"]}
        if old is None:
            changes.append({"operationType": "insert", "documentKey": key_doc,
                            "fullDocument": doc})
        elif old != doc and method in REPLACES:
            changes.append({"operationType": "replace", "documentKey": key_doc,
                            "fullDocument": doc})
        elif old != doc:
            missing = object()
            changes.append({"operationType": "update", "documentKey": key_doc,
                            "updateDescription": {
                                "updatedFields": {k: v for k, v in doc.items()
                                                  if old.get(k, missing) != v},
                                "removedFields": [k for k in old if k not in doc]}})
    changes.extend({"operationType": "delete", "documentKey": {"_id": doc["_id"]}}
                   for key, doc in before.items() if key not in after)
    return changes


class _WatchedCollection(_SessionCheckedCollection):
    """Records the changes of every write; ``watch`` opens a :class:`FakeChangeStream`."""

    def _documents(self) -> dict[Any, dict[str, Any]]:
        return {_key(doc["_id"]): doc for doc in self._inner.find()}

    def __getattr__(self, name: str) -> Any:
        call = super().__getattr__(name)
        if name not in WRITES:
            return call
        client = self._client

        def write(*args: Any, session: Any = None, **kwargs: Any) -> Any:
            with client.lock:
                before = self._documents()
                result = call(*args, session=session, **kwargs)
                changes = _diff(before, self._documents(), name)
                where = (self._inner.database.name, self._inner.name)
                if session is not None and isinstance(session, _RecordingSession):
                    session.pending.append((*where, changes))
                else:
                    client.changes.record(*where, changes)
            return result

        return write

    def watch(self, pipeline: list[dict[str, Any]] | None = None, **kwargs: Any
              ) -> FakeChangeStream:
        return self._client.changes.open(self._inner, list(pipeline or []), kwargs)


class _WatchedDatabase(_Database):
    def __getitem__(self, name: str) -> _WatchedCollection:
        return _WatchedCollection(self._inner[name], self._client)


class _RecordingSession(FakeSession):
    """A transaction whose changes reach the log at commit, none on abort."""

    def __init__(self, client: "ChangeStreamClient") -> None:
        super().__init__(client)
        self.pending: list[tuple[str, str, list[dict[str, Any]]]] = []

    def with_transaction(self, callback, read_concern=None, write_concern=None, **kwargs):
        with self.client.lock:
            self.pending = []
            try:
                result = super().with_transaction(callback, read_concern=read_concern,
                                                  write_concern=write_concern, **kwargs)
            except BaseException:
                self.pending = []
                raise
            for db, coll, changes in self.pending:
                self.client.changes.record(db, coll, changes)
            self.pending = []
            return result


class ChangeStreamClient(TransactionalFakeClient):
    """mongomock as a replica set (or, with ``hello``, a mongos or a standalone) that
    streams changes (see the module docstring)."""

    def __init__(self, hello: dict[str, Any] | None = None) -> None:
        super().__init__(hello)
        self.changes = ChangeLog(self)

    def __getitem__(self, name: str) -> _WatchedDatabase:
        return _WatchedDatabase(self.inner[name], self)

    def start_session(self) -> _RecordingSession:
        return _RecordingSession(self)
