"""A change feed for live migrations: MongoDB change streams, where the deployment has
them (a replica set or mongos; a standalone has no oplog to stream from).

Two collection-level streams, so the feed sees only this adapter's database and
collections: the session-state collection (insert, update, replace, delete; a TTL
expiry is a delete too), whose ``documentKey._id`` is the session id, and the events
collection's inserts, whose document names the user whose log grew (events are only
ever inserted; the counters collection would miss events restored below a counter).
Each stream projects what it needs, so an update's ``updateDescription`` (the blob)
never travels. Opened on construction, before the caller's full scan, so nothing falls
between the scan and the feed; ``drain`` reads without blocking (``try_next``, one short
``getMore`` per stream). A change is streamed once a majority holds it, so a write made
just before a drain may come in the next one; the cutover's final pass scans anyway.

pymongo resumes a stream after a transient error from its resume token, losing nothing.
What it cannot resume is a gap: history rolled off the oplog (ChangeStreamHistoryLost),
a collection dropped or renamed (then ``invalidate``), a network error that outlasts
the resume. The feed then answers None ("do a full scan") once and opens fresh streams,
so a caller never trusts a feed with a gap.
"""

from __future__ import annotations

from typing import Any

from backends.mongo.schema import EVENTS_COLLECTION, STATE_COLLECTION

#: what the server sends before closing a stream whose collection went away: a gap
GAP_OPERATIONS = ("drop", "rename", "dropDatabase", "invalidate")
#: how long one empty ``getMore`` may wait on the server for a change
AWAIT_MS = 50

STATE_PIPELINE = [
    {"$match": {"operationType": {"$in": ["insert", "update", "replace", "delete",
                                          *GAP_OPERATIONS]}}},
    {"$project": {"operationType": 1, "documentKey._id": 1}},
]
EVENTS_PIPELINE = [
    {"$match": {"operationType": {"$in": ["insert", *GAP_OPERATIONS]}}},
    {"$project": {"operationType": 1, "fullDocument.user_id": 1}},
]


def _session_of(change: dict[str, Any]) -> Any:
    return (change.get("documentKey") or {}).get("_id")


def _user_of(change: dict[str, Any]) -> Any:
    return (change.get("fullDocument") or {}).get("user_id")


class ChangeStreamFeed:
    """Streams opened on construction (see the module docstring)."""

    method = "change streams"

    def __init__(self, database: Any) -> None:
        self._db = database
        self._streams: list[tuple[Any, Any]] = []
        self._open()

    def _open(self) -> None:
        opened: list[tuple[Any, Any]] = []
        try:
            for collection, pipeline, key in ((STATE_COLLECTION, STATE_PIPELINE, _session_of),
                                              (EVENTS_COLLECTION, EVENTS_PIPELINE, _user_of)):
                stream = self._db[collection].watch(pipeline, max_await_time_ms=AWAIT_MS)
                opened.append((stream, key))
        except BaseException:
            for stream, _ in opened:
                _close(stream)
            raise
        self._streams = opened

    def drain(self) -> tuple[set[str], set[str]] | None:
        """(session ids, user ids) touched since the last drain, or None when changes
        may have been lost (then reopened: the caller scans in full once)."""
        found: list[set[str]] = [set(), set()]
        try:
            if not self._streams:
                raise ConnectionError("no change streams are open")
            for (stream, key), into in zip(self._streams, found):
                while True:
                    change = stream.try_next()
                    if change is None:
                        break
                    if change.get("operationType") in GAP_OPERATIONS:
                        raise ConnectionError(f"the change stream saw {change['operationType']}")
                    value = key(change)
                    if isinstance(value, str):
                        into.add(value)
                if not stream.alive:  # invalidated, or closed after a fatal error
                    raise ConnectionError("the change stream was closed")
        except Exception:  # noqa: BLE001 - any failure may have lost changes
            self.close()
            try:
                self._open()
            except Exception:  # noqa: BLE001 - the next drain tries again
                self._streams = []
            return None
        return found[0], found[1]

    def close(self) -> None:
        for stream, _ in self._streams:
            _close(stream)
        self._streams = []


def _close(stream: Any) -> None:
    try:
        stream.close()
    except Exception:  # noqa: BLE001 - closing must not fail
        pass


def change_stream_feed(database: Any) -> ChangeStreamFeed | None:
    """The feed, or None when the server refuses to open a stream (no ``changeStream``
    privilege, majority reads off, a server too old)."""
    try:
        return ChangeStreamFeed(database)
    except Exception:  # noqa: BLE001 - a refused stream: the feed is off, the scan works
        return None
